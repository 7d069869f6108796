"""Prototype (benchmark only): a BM25 keyword index in a few numpy arrays, for issue 12's design.

Not used by the plugin. Scores exactly like `lucidrag.keyword.BM25Index` (same tokeniser, same idf,
same length rule: single CJK characters do not count towards a chunk's length, tf capped at 255),
so its top-10 can be compared with ours one to one.

Layout (log-structured, like Lucene's segments):
* a segment = sorted 64-bit term hashes (FNV-1a of the term's UTF-8), `offsets` into one uint32 postings
  array whose entries pack ``slot << 8 | min(tf, 255)`` ascending by slot, and each term's live df;
* per slot (global): chunk length (uint32), chunk id as 16 UUID bytes, an alive flag;
* a file's chunks get consecutive slots inside one segment; ``add_file`` writes a new small
  segment and merges the newest segments while the newest is at least half the size of the one
  before (O(log N) segments; a merge is a linear merge of sorted runs and drops dead postings);
* ``remove_file`` is O(chunks of the file): it clears the file's alive flags and decrements the
  live df of the file's terms (it takes the file's tokenised chunks, i.e. one read of a per-file
  blob in the plugin), so df, N and avgdl are exact at once; the dead postings are skipped by
  queries and dropped at the next merge of their segment.
* ``to_parts`` serialises into key -> bytes values of at most ``part_bytes`` (plugin storage);
  ``from_parts`` maps them back with ``np.frombuffer`` (no parsing per posting).
64-bit FNV-1a hashes instead of term strings: at 10M distinct terms the chance of any collision is
~3e-6, and a collision only merges two terms' postings.
"""

from __future__ import annotations

import json
import math
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lucidrag.keyword import MAX_QUERY_TERMS, tokenize  # noqa: E402

TokenizedChunk = tuple[str, dict[str, int]]
_TF_BITS = 8
_EMPTY_U64 = np.zeros(0, dtype=np.uint64)


_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


def term_hashes(terms: Sequence[str]) -> np.ndarray:
    """64-bit FNV-1a of each term's UTF-8 bytes, vectorised over the terms (one numpy pass per
    byte position instead of one Python call per term). Terms never contain NUL."""
    if not terms:
        return np.zeros(0, dtype=np.uint64)
    raw = np.array([t.encode("utf-8") for t in terms])  # fixed-width bytes, NUL padded
    cols = raw.view(np.uint8).reshape(len(terms), raw.itemsize)
    h = np.full(len(terms), _FNV_OFFSET, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(raw.itemsize):
            b = cols[:, j]
            h = np.where(b != 0, (h ^ b.astype(np.uint64)) * _FNV_PRIME, h)
    return h


def term_hash(term: str) -> int:
    return int(term_hashes([term])[0])


def _counts_length(tfs: dict[str, int]) -> int:
    return sum([tf for t, tf in tfs.items() if len(t) > 1 or t < "\u1100"])


class Segment:
    __slots__ = ("hashes", "offsets", "postings", "df", "lo", "hi")

    def __init__(self, hashes: np.ndarray, offsets: np.ndarray, postings: np.ndarray, df: np.ndarray,
                 lo: int, hi: int) -> None:
        self.hashes = hashes  # uint64, sorted, unique
        self.offsets = offsets  # int64, len(hashes) + 1
        self.postings = postings  # uint32, slot << 8 | tf, ascending by slot within a term
        self.df = df  # int32, live df per term
        self.lo, self.hi = lo, hi  # slot range [lo, hi)

    @property
    def nbytes(self) -> int:
        return self.hashes.nbytes + self.offsets.nbytes + self.postings.nbytes + self.df.nbytes

    def find(self, h: int) -> int:
        i = int(np.searchsorted(self.hashes, np.uint64(h)))
        return i if i < len(self.hashes) and int(self.hashes[i]) == h else -1


def _segment_from_entries(keys: np.ndarray, entries: np.ndarray, lo: int, hi: int) -> Segment:
    """keys (uint64 term hashes) and packed entries, in slot order; stable sort by key keeps slot
    order inside each term."""
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    entries = entries[order]
    if len(keys):
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    else:
        starts = np.zeros(0, dtype=np.int64)
    offsets = np.r_[starts, len(keys)].astype(np.int64)
    return Segment(keys[starts], offsets, entries, np.diff(offsets).astype(np.int32), lo, hi)


class CsrIndex:
    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.segments: list[Segment] = []
        self.lens = np.zeros(0, dtype=np.uint32)
        self.alive = np.zeros(0, dtype=bool)
        self.uuids = np.zeros((0, 16), dtype=np.uint8)
        self._cap = 0
        self.n_slots = 0
        self.files: dict[str, tuple[int, int]] = {}  # file id -> (first slot, chunks)
        self.n = 0
        self.total_len = 0

    # ---------------------------------------------------------------- slots
    def _grow(self, extra: int) -> None:
        need = self.n_slots + extra
        if need <= self._cap:
            return
        cap = max(need, int(self._cap * 1.25) + 1024)
        for name in ("lens", "alive", "uuids"):
            old = getattr(self, name)
            new = np.zeros((cap,) + old.shape[1:], dtype=old.dtype)
            new[: self.n_slots] = old[: self.n_slots]
            setattr(self, name, new)
        self._cap = cap

    # ---------------------------------------------------------------- mutation
    def add_file(self, file_id: str, chunks: Sequence[TokenizedChunk]) -> None:
        if file_id in self.files:
            raise ValueError("remove the file first")
        self._grow(len(chunks))
        base = self.n_slots
        local: dict[str, int] = {}  # the file's distinct terms: each is hashed once
        keys: list[int] = []
        entries: list[int] = []
        lens = self.lens
        for j, (chunk_id, tfs) in enumerate(chunks):
            packed = (base + j) << _TF_BITS
            for term, tf in tfs.items():
                k = local.get(term)
                if k is None:
                    k = local[term] = len(local)
                keys.append(k)
                entries.append(packed | (tf if tf < 255 else 255))
            dl = _counts_length(tfs)
            lens[base + j] = dl
            self.total_len += dl
        self.uuids[base : base + len(chunks)] = np.frombuffer(
            b"".join(uuid.UUID(cid).bytes for cid, _ in chunks), dtype=np.uint8).reshape(-1, 16)
        self.alive[base : base + len(chunks)] = True
        hashes = term_hashes(list(local))
        self.n_slots += len(chunks)
        self.n += len(chunks)
        self.files[file_id] = (base, len(chunks))
        seg = _segment_from_entries(hashes[np.array(keys, dtype=np.int64)], np.array(entries, dtype=np.uint32),
                                    base, self.n_slots)
        self.segments.append(seg)
        self._maybe_merge()

    def _maybe_merge(self) -> None:
        segs = self.segments
        while len(segs) > 1 and len(segs[-1].postings) * 2 >= len(segs[-2].postings):
            b = segs.pop()
            a = segs.pop()
            segs.append(self._merge(a, b))

    def _merge(self, a: Segment, b: Segment) -> Segment:
        """Linear merge: b's slots are all above a's, so a stable sort by hash of a's entries
        followed by b's keeps every term's postings in slot order. Dead postings are dropped."""
        keys = np.concatenate([np.repeat(a.hashes, np.diff(a.offsets)), np.repeat(b.hashes, np.diff(b.offsets))])
        entries = np.concatenate([a.postings, b.postings])
        live = self.alive[entries >> _TF_BITS]
        if not live.all():
            keys, entries = keys[live], entries[live]
        return _segment_from_entries(keys, entries, a.lo, b.hi)

    def remove_file(self, file_id: str, chunks: Sequence[TokenizedChunk]) -> bool:
        """Forget a file: O(its chunks). `chunks` = its tokenised chunks (as it was added)."""
        entry = self.files.pop(file_id, None)
        if entry is None:
            return False
        first, count = entry
        seg = next(s for s in self.segments if s.lo <= first < s.hi)
        doc_terms: dict[str, int] = {}
        for _, tfs in chunks:
            for t in tfs:
                doc_terms[t] = doc_terms.get(t, 0) + 1
        hs = term_hashes(list(doc_terms))
        idx = np.searchsorted(seg.hashes, hs)
        np.subtract.at(seg.df, idx, np.fromiter(doc_terms.values(), dtype=np.int32, count=len(doc_terms)))
        sl = slice(first, first + count)
        self.alive[sl] = False
        self.n -= count
        self.total_len -= int(self.lens[sl].sum())
        return True

    # ---------------------------------------------------------------- queries
    def search(self, query: str, top_k: int) -> list[tuple[str, float]]:
        if top_k <= 0 or self.n == 0:
            return []
        found = []
        for term in dict.fromkeys(tokenize(query, query=True)):
            h = term_hash(term)
            hits = []
            df = 0
            for seg in self.segments:
                i = seg.find(h)
                if i >= 0 and seg.df[i] > 0:
                    df += int(seg.df[i])
                    hits.append(seg.postings[seg.offsets[i] : seg.offsets[i + 1]])
            if df:
                found.append((df, term, hits))
        if not found:
            return []
        found.sort(key=lambda x: (x[0], x[1]))
        del found[MAX_QUERY_TERMS:]
        n, k1 = self.n, self.k1
        norm = k1 * (1.0 - self.b)
        coef = k1 * self.b / (self.total_len / n)
        slots_l, contrib_l = [], []
        for df, _, hits in found:
            w = math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * (k1 + 1.0)
            p = hits[0] if len(hits) == 1 else np.concatenate(hits)
            s = p >> _TF_BITS
            tf = (p & 255).astype(np.float64)
            slots_l.append(s)
            contrib_l.append(w * tf / (tf + norm + coef * self.lens[s]))
        slots = np.concatenate(slots_l)
        contrib = np.concatenate(contrib_l)
        live = self.alive[slots]
        if not live.all():
            slots, contrib = slots[live], contrib[live]
        if len(slots) * 8 < self.n_slots:
            cand, inv = np.unique(slots, return_inverse=True)
            scores = np.bincount(inv, weights=contrib)
        else:
            dense = np.bincount(slots, weights=contrib, minlength=self.n_slots)
            cand = np.flatnonzero(dense)
            scores = dense[cand]
        if len(cand) > top_k:
            part = np.argpartition(-scores, top_k - 1)[:top_k]
        else:
            part = np.arange(len(cand))
        order = part[np.lexsort((cand[part], -scores[part]))]
        return [(str(uuid.UUID(bytes=self.uuids[cand[i]].tobytes())), float(scores[i])) for i in order]

    def df(self, term: str) -> int:
        h = term_hash(term)
        return sum(int(s.df[i]) for s in self.segments if (i := s.find(h)) >= 0)

    @property
    def nbytes(self) -> int:
        return (sum(s.nbytes for s in self.segments) + self.lens.nbytes + self.alive.nbytes
                + self.uuids.nbytes)

    # ---------------------------------------------------------------- persistence
    def to_parts(self, part_bytes: int = 4 << 20) -> dict[str, bytes]:
        """key -> bytes, each value at most `part_bytes`: one key group per segment (immutable
        once written, so an add writes only its new/merged segments), plus the slot table."""
        parts: dict[str, bytes] = {}

        def put(name: str, data: bytes) -> None:
            for k in range(0, max(len(data), 1), part_bytes):
                parts[f"{name}.{k // part_bytes:05d}"] = data[k : k + part_bytes]

        n = self.n_slots
        meta = {"k1": self.k1, "b": self.b, "n_slots": n, "files": self.files,
                "segments": [[s.lo, s.hi, len(s.hashes), len(s.postings)] for s in self.segments]}
        put("meta", json.dumps(meta).encode())
        put("slots", self.lens[:n].tobytes() + np.packbits(self.alive[:n]).tobytes() + self.uuids[:n].tobytes())
        for s in self.segments:
            put(f"seg-{s.lo}-{s.hi}", s.hashes.tobytes() + s.offsets.tobytes() + s.postings.tobytes())
        return parts

    @classmethod
    def from_parts(cls, parts: dict[str, bytes]) -> CsrIndex:
        def get(name: str) -> bytes:
            keys = sorted(k for k in parts if k.rsplit(".", 1)[0] == name)
            return b"".join(parts[k] for k in keys) if len(keys) > 1 else parts[keys[0]]

        meta = json.loads(get("meta"))
        idx = cls(meta["k1"], meta["b"])
        n = idx.n_slots = idx._cap = meta["n_slots"]
        raw = get("slots")
        idx.lens = np.frombuffer(raw, dtype=np.uint32, count=n).copy()
        nb = (n + 7) // 8
        idx.alive = np.unpackbits(np.frombuffer(raw, dtype=np.uint8, count=nb, offset=4 * n), count=n).astype(bool)
        idx.uuids = np.frombuffer(raw, dtype=np.uint8, count=16 * n, offset=4 * n + nb).reshape(n, 16).copy()
        idx.files = {k: tuple(v) for k, v in meta["files"].items()}
        idx.n = int(idx.alive.sum())
        idx.total_len = int(idx.lens[idx.alive].sum())
        for lo, hi, t, p in meta["segments"]:
            raw = get(f"seg-{lo}-{hi}")
            hashes = np.frombuffer(raw, dtype=np.uint64, count=t)
            offsets = np.frombuffer(raw, dtype=np.int64, count=t + 1, offset=8 * t)
            postings = np.frombuffer(raw, dtype=np.uint32, count=p, offset=16 * t + 8)
            if idx.alive[lo:hi].all():
                df = np.diff(offsets).astype(np.int32)
            else:  # exact live df: count live postings per term
                df = np.add.reduceat(idx.alive[postings >> _TF_BITS].astype(np.int32), offsets[:-1]) if t else \
                    np.zeros(0, dtype=np.int32)
            idx.segments.append(Segment(hashes, offsets, postings, df, lo, hi))
        return idx
