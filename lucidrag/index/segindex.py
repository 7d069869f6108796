"""The keyword index for large knowledge bases: BM25 over immutable numpy segments, persisted
incrementally.

Scores exactly like the reference ``BM25Index`` (tests/reference_bm25.py) (same terms from ``tokenize_chunks`` /
``query_terms``, same idf, the heading field scored BM25F-style, tf capped at 255, single CJK
characters and heading terms not counted in a chunk's length, the rarest ``MAX_QUERY_TERMS``
query terms, exact top-k with MaxScore pruning), but holds a million chunks in ~0.7 KB each and
restarts from a snapshot with ``np.frombuffer`` instead of re-tokenising. No I/O; the caller
persists what ``take_changes`` hands out. Not thread-safe: call one method at a time.

Layout (log-structured, like Lucene's segments)
-----------------------------------------------
* A **segment** is immutable once built: a file table (file ids, first slot of each file, each
  file's posting count), per slot (= chunk) its BM25 length and its id (16 bytes when the chunk
  ids are canonical UUIDs, as the plugin's are, else UTF-8), the sorted 64-bit FNV-1a hashes of
  its terms (heading-field terms are prefixed ``HEADING_FIELD``), and per term a run of packed
  ``uint32`` postings ``local_slot << 8 | min(tf, 255)`` ascending by slot. 64-bit hashes instead
  of term strings: at 10M distinct terms the chance of any collision is ~3e-6, and a collision
  only merges two terms' postings.
* ``add_file`` builds a one-file segment (vectorised; no per-posting Python work beyond reading
  the token dicts) and then runs the merge policy.
* ``remove_file`` is O(chunks of the file): it marks the file as a **tombstone** in its segment,
  and decrements the segment's live df of the file's terms (found from the file's tokenised
  chunks, checked against the segment; without them, by one scan of the segment's postings), so
  df, N and avgdl are exact at once. Dead postings are skipped by queries and dropped when their
  segment is next merged.
* **Merge policy** (runs inside ``add_file``/``remove_file``, or ``maintain()``): a segment whose
  dead slots exceed ``PURGE_DEAD_SHARE`` of its slots is rewritten alone; a segment whose files
  are all removed is dropped. Segments built with fewer than ``PERSIST_POSTINGS`` live postings
  are held in memory only; once those together reach it, they are merged into one (persisted)
  segment. Otherwise segments are grouped in levels by live postings, in memory (level L holds
  [BASE*F^L, BASE*F^(L+1)), F = ``MERGE_FACTOR``) and persisted (from ``PERSIST_POSTINGS``, F =
  ``PERSISTED_MERGE_FACTOR``), and F segments of one level are merged into one, never beyond
  ``MAX_SEGMENT_POSTINGS`` (segments of at least half of it are left alone). So there are at most
  ~(F-1) segments per level plus the full ones (query cost), and each posting is written to
  storage about 2 times on the way to 1M chunks (once when it is persisted, then per persisted
  level), where persisting every segment and merging 8 at a time wrote it ~5.4 times. A merge is
  a linear, vectorised k-way scatter (the inputs' term runs are already sorted), not a sort.
* **Persistence**: a segment is one blob (sections 8-byte aligned, loaded with ``np.frombuffer``,
  no per-posting work); the **manifest** (small, zlib'd JSON) lists the persisted segments in
  order with their size and CRC-32, the removed files of each (tombstones), and the name token
  and counter (unused on load: a loaded index names its segments with a new token, so none meets
  a segment a crash left unnamed), and the tokeniser's ``terms.TERMS_VERSION``: a manifest of
  another version is refused like a corrupt one (``ValueError``), so the knowledge base indexes
  its files again from their records. ``take_changes`` returns the persisted segments created since
  the last call, the names of persisted segments that are no longer referenced, and the manifest
  (and whether it changed); write the new segments, then the manifest, then delete the dropped
  ones. The files of the in-memory segments are in no manifest: the caller indexes them again
  (from their records) after a restart. ``load`` recomputes each segment's live df when it has
  tombstones (one vectorised pass over that segment's postings).

Global slot numbering (for scoring) is the segments' slots in list order; ties in score are
ordered by it (insertion order, modulo merges), where ``BM25Index`` orders them by first touch.
"""

from __future__ import annotations

import json
import secrets
import struct
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

import numpy as np

from lucidrag.index import terms
from lucidrag.index.terms import (
    HEADING_FIELD,
    HEADING_WEIGHT,
    MAX_QUERY_TERMS,
    TERMS_VERSION,
    bm25_params,
    idf,
    query_terms,
)

__all__ = ["IndexChanges", "KeywordHit", "SegmentIndex", "TokenizedChunk", "term_hashes"]

TokenizedChunk = terms.TokenizedChunk

_TF_BITS = 8
_TF_MAX = (1 << _TF_BITS) - 1
_MAX_SEGMENT_SLOTS = 1 << (32 - _TF_BITS)  # local slots must fit in 24 bits

MERGE_FACTOR = 8  # fan-in of the merges of segments held in memory only
BASE_POSTINGS = 4096  # level 0 of those: below BASE_POSTINGS * MERGE_FACTOR live postings
# A segment is persisted once it holds this many live postings (~3,500 chunks, ~2-3 MiB); the
# smaller ones live in memory only and are rebuilt from the files' records after a restart. When
# those together reach it, they are merged into one persisted segment. Each write of a posting to
# plugin storage costs more than a merge in memory (docs/SCALE.md, "what is persisted").
PERSIST_POSTINGS = 1 << 19
PERSISTED_MERGE_FACTOR = 16  # fan-in of the merges of persisted segments (level 0: PERSIST_POSTINGS)
MAX_SEGMENT_POSTINGS = 1 << 25  # ~128 MiB of postings: the largest segment a merge builds
PURGE_DEAD_SHARE = 0.3  # rewrite a segment alone once this share of its slots is dead
_BLOCK = 1 << 22  # postings per vectorised block in merges and scans (bounds temporary memory)
# MaxScore's look-up phase binary-searches a term's postings for each remaining candidate unless
# the candidates outnumber 1/_LOOKUP_RATIO of the postings: then one pass over them is cheaper
_LOOKUP_RATIO = 8

_SEG_MAGIC = b"LRSG"
_MANIFEST_MAGIC = b"LRSM"
_FORMAT_VERSION = 1

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_ABSENT = 1 << 62  # df of a field a term does not occur in: ranks last (as the reference BM25's _df)


@dataclass(frozen=True)
class KeywordHit:
    chunk_id: str
    file_id: str
    score: float  # BM25, as BM25Index.search gives it
    coverage: float  # tests/reference_bm25.coverages(term_weights(q), text, heading)[0]
    body_coverage: float  # ...[1]: the share matched by the chunk's body alone


@dataclass(frozen=True)
class IndexChanges:
    """What to write to plugin storage since the last ``take_changes()``: the new segments first,
    then the manifest (if ``manifest_changed``), then delete the dropped segments."""

    new_segments: dict[str, bytes]
    dropped_segments: list[str]
    manifest: bytes  # of the persisted segments, current
    manifest_changed: bool  # since the last call: else storage holds it already (if that write succeeded)


def _term_table(terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(64-bit FNV-1a hash of each term's code points, whether it counts towards its chunk's
    length, as in tests/reference_bm25.py), vectorised over the terms: one numpy pass
    per character position, over the terms that long. Terms never contain NUL (the fixed-width
    array pads with it)."""
    if not len(terms):
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=bool)
    arr = np.array(terms, dtype=str)
    if arr.itemsize < 8:
        arr = arr.astype("U2")
    width = arr.itemsize // 4
    codes = arr.view(np.uint32).reshape(len(terms), width)
    first = codes[:, 0]
    counts = (codes[:, 1] != 0) | (first < 0x1100)
    counts &= first != ord(HEADING_FIELD)
    lens = np.count_nonzero(codes, axis=1)
    order = np.argsort(-lens, kind="stable")
    codes = codes[order]
    active = np.bincount(lens, minlength=width + 1)[::-1].cumsum()[::-1]  # active[j]: terms longer than j - 1
    h = np.full(len(terms), _FNV_OFFSET, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(int(lens.max())):
            m = int(active[j + 1])
            h[:m] = (h[:m] ^ codes[:m, j]) * _FNV_PRIME
    out = np.empty_like(h)
    out[order] = h
    return out, counts


def term_hashes(terms: Sequence[str]) -> np.ndarray:
    """The 64-bit hashes the index stores terms by."""
    return _term_table(terms)[0]


def _is_uuid(s: str) -> bool:
    try:
        return len(s) == 36 and str(uuid.UUID(s)) == s
    except (ValueError, TypeError, AttributeError):
        return False


def _align8(n: int) -> int:
    return (n + 7) & ~7


# --------------------------------------------------------------------------------------------
# Segment
# --------------------------------------------------------------------------------------------


class _Segment:
    """One immutable segment plus its mutable tombstone state (dead files, live df)."""

    __slots__ = ("name", "file_ids", "file_starts", "file_postings", "lens", "hashes", "offsets",
                 "postings", "df", "uuids", "id_offsets", "id_blob", "dead_files", "dead_slots",
                 "dead_postings", "crc", "nbytes", "base", "durable")

    def __init__(self, name: str, file_ids: list[str], file_starts: np.ndarray, file_postings: np.ndarray,
                 lens: np.ndarray, hashes: np.ndarray, offsets: np.ndarray, postings: np.ndarray,
                 uuids: np.ndarray | None, id_offsets: np.ndarray | None, id_blob: bytes | None) -> None:
        self.name = name
        self.file_ids = file_ids
        self.file_starts = file_starts  # uint32[F+1]
        self.file_postings = file_postings  # uint32[F]
        self.lens = lens  # uint32[S]
        self.hashes = hashes  # uint64[T], strictly increasing
        self.offsets = offsets  # uint32[T+1]
        self.postings = postings  # uint32[P]
        self.df: np.ndarray | None = None  # live df per term once a file was removed, else offsets' diff
        self.uuids = uuids  # uint8[S, 16] or None
        self.id_offsets = id_offsets  # uint32[S+1] into id_blob, or None
        self.id_blob = id_blob
        self.dead_files: set[int] = set()
        self.dead_slots = 0
        self.dead_postings = 0
        self.crc: int | None = None  # of the serialised blob, once serialised
        self.nbytes = 0
        self.base = 0  # first global slot (set by SegmentIndex._relayout/_append)
        # persisted (built with at least PERSIST_POSTINGS live postings, or loaded); else held in
        # memory only, and its files are indexed again from their records after a restart
        self.durable = len(postings) >= PERSIST_POSTINGS

    @property
    def n_slots(self) -> int:
        return len(self.lens)

    @property
    def n_files(self) -> int:
        return len(self.file_ids)

    def live_df(self) -> np.ndarray:
        """Live df per term (postings minus those of removed files), materialised on first use."""
        if self.df is None:
            self.df = np.diff(self.offsets).astype(np.int32)
        return self.df

    def term_df(self) -> np.ndarray:
        return self.df if self.df is not None else np.diff(self.offsets).astype(np.int32)

    @property
    def live_postings(self) -> int:
        return len(self.postings) - self.dead_postings

    def file_range(self, fi: int) -> tuple[int, int]:
        return int(self.file_starts[fi]), int(self.file_starts[fi + 1])

    def chunk_id(self, local: int) -> str:
        if self.uuids is not None:
            return str(uuid.UUID(bytes=self.uuids[local].tobytes()))
        a, b = int(self.id_offsets[local]), int(self.id_offsets[local + 1])  # type: ignore[index]
        return self.id_blob[a:b].decode("utf-8")  # type: ignore[index]

    def chunk_ids(self) -> list[str]:
        return [self.chunk_id(i) for i in range(self.n_slots)]

    def alive(self) -> np.ndarray:
        mask = np.ones(self.n_slots, dtype=bool)
        for fi in self.dead_files:
            a, b = self.file_range(fi)
            mask[a:b] = False
        return mask

    def memory(self) -> int:
        ids = self.uuids.nbytes if self.uuids is not None else self.id_offsets.nbytes + len(self.id_blob)  # type: ignore[union-attr, arg-type]
        return (self.file_starts.nbytes + self.file_postings.nbytes + self.lens.nbytes + self.hashes.nbytes
                + self.offsets.nbytes + self.postings.nbytes + (0 if self.df is None else self.df.nbytes) + ids
                + sum(len(f) + 49 for f in self.file_ids))

    def find(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(indices of the hashes present, their positions in ``hashes``)."""
        if not len(self.hashes):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        idx = np.searchsorted(self.hashes, hashes)
        idx[idx >= len(self.hashes)] = 0
        hit = np.flatnonzero(self.hashes[idx] == hashes)
        return idx[hit], hit

    def term_of_positions(self, positions: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.offsets, positions, side="right") - 1

    def scan_slots(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(term indices, posting counts) of the postings of local slots [lo, hi): one pass over
        the segment's postings in blocks."""
        found = []
        p = self.postings
        for a in range(0, len(p), _BLOCK):
            s = p[a : a + _BLOCK] >> _TF_BITS
            pos = np.flatnonzero((s >= lo) & (s < hi))
            if len(pos):
                found.append(self.term_of_positions(pos + a))
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        terms, counts = np.unique(np.concatenate(found), return_counts=True)
        return terms, counts

    def dead_df(self, alive: np.ndarray) -> np.ndarray:
        """Postings per term that belong to dead slots."""
        out = np.zeros(len(self.hashes), dtype=np.int64)
        p = self.postings
        for a in range(0, len(p), _BLOCK):
            pos = np.flatnonzero(~alive[p[a : a + _BLOCK] >> _TF_BITS])
            if len(pos):
                out += np.bincount(self.term_of_positions(pos + a), minlength=len(out))
        return out

    # -- serialisation -------------------------------------------------------------------
    # LRSG, version byte, 3 zero bytes, u32 header length, header JSON (counts, id mode, file
    # ids), then 8-byte aligned little-endian sections: file_starts u32[F+1], file_postings
    # u32[F], lens u32[S], hashes u64[T], offsets u32[T+1], postings u32[P], then the chunk ids:
    # u8[16*S] (uuid mode) or id_offsets u32[S+1] + UTF-8 blob.

    def to_bytes(self) -> bytes:
        header = {"slots": self.n_slots, "terms": len(self.hashes), "postings": len(self.postings),
                  "ids": "uuid" if self.uuids is not None else "str",
                  "id_bytes": 0 if self.id_blob is None else len(self.id_blob), "files": self.file_ids}
        hb = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        head = _SEG_MAGIC + bytes([_FORMAT_VERSION, 0, 0, 0]) + struct.pack("<I", len(hb)) + hb
        parts = [head, bytes(_align8(len(head)) - len(head))]
        arrays = [self.file_starts, self.file_postings, self.lens, self.hashes, self.offsets, self.postings]
        if self.uuids is not None:
            arrays.append(self.uuids.reshape(-1))
        else:
            arrays.append(self.id_offsets)  # type: ignore[arg-type]
        for arr in arrays:
            raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
            parts.append(raw)
            parts.append(bytes(_align8(len(raw)) - len(raw)))
        if self.id_blob is not None:
            parts.append(self.id_blob)
        blob = b"".join(parts)
        self.crc = zlib.crc32(blob)
        self.nbytes = len(blob)
        return blob

    @classmethod
    def from_bytes(cls, name: str, blob: bytes) -> _Segment:
        if len(blob) < 12 or blob[:4] != _SEG_MAGIC:
            raise ValueError(f"segment {name}: not a LucidRAG index segment")
        if blob[4] != _FORMAT_VERSION:
            raise ValueError(f"segment {name}: unsupported format version {blob[4]}")
        (hlen,) = struct.unpack_from("<I", blob, 8)
        try:
            header = json.loads(bytes(blob[12 : 12 + hlen]).decode("utf-8"))
            s, t, p = int(header["slots"]), int(header["terms"]), int(header["postings"])
            files = header["files"]
            mode, id_bytes = header["ids"], int(header["id_bytes"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise ValueError(f"segment {name}: bad header: {exc}") from None
        if min(s, t, p, id_bytes) < 0 or mode not in ("uuid", "str") or not isinstance(files, list) \
                or not all(isinstance(f, str) for f in files):
            raise ValueError(f"segment {name}: bad header")
        f = len(files)
        pos = _align8(12 + hlen)
        u4, u8 = np.dtype("<u4"), np.dtype("<u8")

        def take(dtype: np.dtype, count: int) -> np.ndarray:
            nonlocal pos
            size = dtype.itemsize * count
            if pos + size > len(blob):
                raise ValueError(f"segment {name}: truncated")
            arr = np.frombuffer(blob, dtype=dtype, count=count, offset=pos)
            pos = _align8(pos + size)
            return arr

        file_starts = take(u4, f + 1)
        file_postings = take(u4, f)
        lens = take(u4, s)
        hashes = take(u8, t)
        offsets = take(u4, t + 1)
        postings = take(u4, p)
        uuids = id_offsets = id_blob = None
        if mode == "uuid":
            uuids = take(np.dtype(np.uint8), 16 * s).reshape(s, 16)
        else:
            id_offsets = take(u4, s + 1)
            if pos + id_bytes != len(blob):
                raise ValueError(f"segment {name}: truncated")
            id_blob = bytes(blob[pos : pos + id_bytes])
            if id_offsets[0] != 0 or id_offsets[-1] != id_bytes or (s and np.any(np.diff(id_offsets.astype(np.int64)) < 0)):
                raise ValueError(f"segment {name}: bad chunk ids")
        if file_starts[0] != 0 or file_starts[-1] != s or np.any(np.diff(file_starts.astype(np.int64)) < 0):
            raise ValueError(f"segment {name}: bad file table")
        if offsets[0] != 0 or offsets[-1] != p or (t and np.any(np.diff(offsets.astype(np.int64)) <= 0)):
            raise ValueError(f"segment {name}: bad term offsets")
        if t > 1 and np.any(hashes[1:] <= hashes[:-1]):
            raise ValueError(f"segment {name}: term hashes not sorted")
        if p and int(postings.max()) >> _TF_BITS >= s:
            raise ValueError(f"segment {name}: posting refers to a missing chunk")
        if int(file_postings.sum(dtype=np.int64)) != p:
            raise ValueError(f"segment {name}: posting counts do not match the files")
        seg = cls(name, list(files), file_starts, file_postings, lens, hashes, offsets, postings,
                  uuids, id_offsets, id_blob)
        return seg


def _build_segment(name: str, file_id: str, chunks: Sequence[TokenizedChunk]) -> _Segment:
    """A one-file segment from its tokenised chunks (vectorised apart from reading the dicts)."""
    n = len(chunks)
    if n >= _MAX_SEGMENT_SLOTS:
        raise ValueError(f"a file of {n} chunks is more than one index segment holds ({_MAX_SEGMENT_SLOTS - 1})")
    ids = [cid for cid, _ in chunks]
    dicts = [tfs for _, tfs in chunks]
    if not all(isinstance(c, str) for c in ids) or not all(isinstance(d, dict) for d in dicts):
        raise ValueError("chunks must be (chunk_id: str, {term: tf}) pairs")
    counts = np.fromiter(map(len, dicts), dtype=np.int64, count=n)
    total = int(counts.sum())
    all_terms = list(chain.from_iterable(dicts))
    tfs = np.fromiter(chain.from_iterable(d.values() for d in dicts), dtype=np.int64, count=total)
    if total and int(tfs.min()) < 1:
        raise ValueError("term frequencies must be positive")
    h, flags = _term_table(all_terms)
    slots = np.repeat(np.arange(n, dtype=np.int64), counts)
    dl = np.bincount(slots, weights=np.where(flags, tfs, 0), minlength=n)
    order = np.argsort(h, kind="stable")  # entries are in slot order: runs stay ascending by slot
    h = h[order]
    entries = ((slots[order] << _TF_BITS) | np.minimum(tfs[order], _TF_MAX)).astype(np.uint32)
    starts = np.flatnonzero(np.r_[True, h[1:] != h[:-1]]) if total else np.zeros(0, dtype=np.int64)
    offsets = np.r_[starts, total].astype(np.uint32)
    if all(map(_is_uuid, ids)):
        uuids = np.frombuffer(b"".join(uuid.UUID(c).bytes for c in ids), dtype=np.uint8).reshape(n, 16)
        id_offsets = id_blob = None
    else:
        enc = [c.encode("utf-8") for c in ids]
        uuids = None
        id_offsets = np.r_[0, np.cumsum([len(e) for e in enc], dtype=np.int64)].astype(np.uint32)
        id_blob = b"".join(enc)
    return _Segment(name, [file_id], np.array([0, n], dtype=np.uint32), np.array([total], dtype=np.uint32),
                    dl.astype(np.uint32), h[starts], offsets, entries, uuids, id_offsets, id_blob)


# --------------------------------------------------------------------------------------------
# The index
# --------------------------------------------------------------------------------------------


class SegmentIndex:
    """BM25 keyword index over chunks by file, in persisted segments (see the module docstring)."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = float(k1)
        self.b = float(b)
        self._token = secrets.token_hex(4)  # segment names of this index never meet another's
        self._next = 0
        self._segments: list[_Segment] = []
        self._files: dict[str, tuple[_Segment, int]] = {}
        self._n = 0
        self._total_len = 0
        self._n_slots = 0
        self._lens = np.zeros(0, dtype=np.uint32)  # global slot -> length (capacity-grown)
        self._alive = np.zeros(0, dtype=bool)
        self._scores = np.zeros(0, dtype=np.float64)  # scratch for search, all zero between calls
        self._dead_total = 0
        self._unsaved: set[str] = set()  # live segments not yet handed out by take_changes
        self._persisted: set[str] = set()  # segment names handed out (or loaded)
        self._dropped: list[str] = []  # persisted names no longer referenced
        self._listed: list[dict] | None = None  # the segments of the manifest last handed out

    # -- mutation ------------------------------------------------------------------------

    def add_file(self, file_id: str, chunks: Sequence[TokenizedChunk]) -> None:
        """Index a file's tokenised chunks (``terms.tokenize_chunks``); ``ValueError`` if the
        file is already indexed (remove it first). Runs the merge policy afterwards."""
        if not isinstance(file_id, str):
            raise ValueError("file_id must be a string")
        if file_id in self._files:
            raise ValueError(f"file {file_id!r} is already indexed; remove it first")
        seg = _build_segment(self._new_name(), file_id, chunks)
        self._append(seg)
        self._maintain()

    def remove_file(self, file_id: str, chunks: Sequence[TokenizedChunk] | None = None) -> bool:
        """Forget a file; ``False`` if it is not indexed. ``chunks`` = its tokenised chunks as
        added: O(chunks of the file). ``None`` (or chunks that do not match what was added):
        the file's terms are found by one scan of its segment. df, N and avgdl are exact at once."""
        entry = self._files.get(file_id)
        if entry is None:
            return False
        seg, fi = entry
        lo, hi = seg.file_range(fi)
        found = self._file_terms_from_chunks(seg, fi, chunks) if chunks is not None else None
        terms, counts = found if found is not None else seg.scan_slots(lo, hi)
        del self._files[file_id]
        np.subtract.at(seg.live_df(), terms, counts.astype(np.int32))
        seg.dead_files.add(fi)
        seg.dead_slots += hi - lo
        seg.dead_postings += int(counts.sum())
        self._dead_total += hi - lo
        self._alive[seg.base + lo : seg.base + hi] = False
        self._n -= hi - lo
        self._total_len -= int(seg.lens[lo:hi].sum(dtype=np.int64))
        self._maintain()
        return True

    def maintain(self) -> None:
        """Run pending merges and purges. ``add_file`` and ``remove_file`` already do; call it
        only after changing a policy constant."""
        self._maintain()

    def _file_terms_from_chunks(self, seg: _Segment, fi: int, chunks: Sequence[TokenizedChunk]
                                ) -> tuple[np.ndarray, np.ndarray] | None:
        """(term indices, counts) of the file's postings from its tokenised chunks, or None when
        they do not match the segment exactly (then the caller scans)."""
        lo, hi = seg.file_range(fi)
        try:
            if len(chunks) != hi - lo:
                return None
            per_chunk = [list(tfs) for _, tfs in chunks]
        except (TypeError, ValueError):
            return None
        n_post = sum(map(len, per_chunk))
        if n_post != int(seg.file_postings[fi]):
            return None
        if n_post == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        flat = list(chain.from_iterable(per_chunk))
        distinct = list(dict.fromkeys(flat))
        where = dict(zip(distinct, range(len(distinct))))
        keys = np.fromiter(map(where.__getitem__, flat), dtype=np.int64, count=n_post)
        idx, pos = seg.find(term_hashes(distinct))
        if len(pos) != len(distinct):
            return None
        term_idx = idx[keys]
        slots = np.repeat(np.arange(lo, hi, dtype=np.int64), [len(t) for t in per_chunk])
        # every (term, slot) pair must be a posting of the segment: vectorised binary search
        # inside each term's run
        left = seg.offsets[term_idx].astype(np.int64)
        right = seg.offsets[term_idx + 1].astype(np.int64)
        target = slots << _TF_BITS
        while True:
            active = left < right
            if not active.any():
                break
            mid = (left + right) >> 1
            less = (seg.postings[np.where(active, mid, 0)].astype(np.int64) < target) & active
            left = np.where(less, mid + 1, left)
            right = np.where(active & ~less, mid, right)
        ok = left < seg.offsets[term_idx + 1].astype(np.int64)
        if not ok.all() or not np.all(seg.postings[left].astype(np.int64) >> _TF_BITS == slots):
            return None
        terms, counts = np.unique(term_idx, return_counts=True)
        if np.any(seg.term_df()[terms] < counts):
            return None
        return terms, counts

    # -- segments and merges ------------------------------------------------------------

    def _new_name(self) -> str:
        name = f"{self._token}.{self._next:06d}"
        self._next += 1
        return name

    def _append(self, seg: _Segment) -> None:
        need = self._n_slots + seg.n_slots
        if need > len(self._lens):
            self._grow(max(need, int(len(self._lens) * 1.25) + 1024))
        seg.base = self._n_slots
        self._lens[seg.base : need] = seg.lens
        self._alive[seg.base : need] = True
        self._n_slots = need
        self._segments.append(seg)
        for fi, fid in enumerate(seg.file_ids):
            self._files[fid] = (seg, fi)
        self._n += seg.n_slots
        self._total_len += int(seg.lens.sum(dtype=np.int64))
        if seg.durable:
            self._unsaved.add(seg.name)

    def _grow(self, cap: int) -> None:
        for name in ("_lens", "_alive"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            keep = min(self._n_slots, cap)
            new[:keep] = old[:keep]
            setattr(self, name, new)
        self._scores = np.zeros(cap, dtype=np.float64)

    def _relayout(self, start: int = 0) -> None:
        """Global slot numbers after segments from list position ``start`` on were merged or
        dropped (merges mostly touch the newest, smallest segments at the end of the list)."""
        segs = self._segments
        start = min(start, len(segs))
        base = segs[start - 1].base + segs[start - 1].n_slots if start else 0
        for seg in segs[start:]:
            seg.base = base
            base += seg.n_slots
        if base > len(self._lens) or base < len(self._lens) // 2:
            self._grow(base + max(1024, base // 8))
        for seg in segs[start:]:
            self._lens[seg.base : seg.base + seg.n_slots] = seg.lens
            self._alive[seg.base : seg.base + seg.n_slots] = seg.alive()
        self._n_slots = base
        self._dead_total = sum(s.dead_slots for s in segs)

    def _forget(self, seg: _Segment) -> None:
        if seg.name in self._persisted:
            self._dropped.append(seg.name)
            self._persisted.discard(seg.name)
        self._unsaved.discard(seg.name)

    def _maintain(self) -> None:
        first_changed = len(self._segments)
        while True:
            empty = [s for s in self._segments if s.n_files and len(s.dead_files) == s.n_files]
            if empty:
                for seg in empty:
                    first_changed = min(first_changed, self._segments.index(seg))
                    self._segments.remove(seg)
                    self._forget(seg)
                continue
            plan = self._next_merge()
            if plan is None:
                break
            first_changed = min(first_changed, self._merge(plan))
        if first_changed < len(self._segments) or self._n_slots != sum(s.n_slots for s in self._segments):
            self._relayout(first_changed)

    def _next_merge(self) -> list[_Segment] | None:
        for seg in self._segments:
            if seg.dead_slots and seg.dead_slots > PURGE_DEAD_SHARE * seg.n_slots:
                return [seg]
        in_memory = [s for s in self._segments if not s.durable]
        if len(in_memory) > 1 and sum(s.live_postings for s in in_memory) >= PERSIST_POSTINGS:
            return self._fitting(in_memory)  # into one segment that is persisted
        levels: dict[tuple[bool, int], list[_Segment]] = {}
        for seg in self._segments:
            size = seg.live_postings
            if size * 2 >= MAX_SEGMENT_POSTINGS:
                continue  # full: only purges rewrite it
            factor = PERSISTED_MERGE_FACTOR if seg.durable else MERGE_FACTOR
            level, bound = 0, (max(PERSIST_POSTINGS, BASE_POSTINGS) if seg.durable else BASE_POSTINGS) * factor
            while size >= bound:
                level += 1
                bound *= factor
            levels.setdefault((seg.durable, level), []).append(seg)
        for (durable, level) in sorted(levels):
            members = levels[durable, level]
            factor = PERSISTED_MERGE_FACTOR if durable else MERGE_FACTOR
            if len(members) >= factor:
                return self._fitting(members[:factor])
        return None

    @staticmethod
    def _fitting(pick: list[_Segment]) -> list[_Segment]:
        """The first of these segments whose merge stays within one segment's limits (at least 2)."""
        while len(pick) > 2 and (sum(s.live_postings for s in pick) > MAX_SEGMENT_POSTINGS
                                 or sum(s.n_slots - s.dead_slots for s in pick) >= _MAX_SEGMENT_SLOTS):
            pick.pop()
        return pick

    def _merge(self, segs: list[_Segment]) -> int:
        """Replace ``segs`` (in list order) by one segment without their dead slots, placed
        where the first of them was. A linear k-way scatter: each input's term runs are copied
        behind the earlier inputs' runs of the same term, so runs stay ascending by slot."""
        alive = [s.alive() for s in segs]
        live_slots = [int(a.sum()) for a in alive]
        new_base = np.cumsum([0] + live_slots)
        dfs = [s.term_df() for s in segs]
        union = np.sort(np.concatenate([s.hashes[d > 0] for s, d in zip(segs, dfs)]), kind="stable")  # sorted runs
        if len(union):
            union = union[np.r_[True, union[1:] != union[:-1]]]
        where = [np.searchsorted(union, s.hashes) for s in segs]
        cnt = np.zeros(len(union), dtype=np.int64)
        for d, m in zip(dfs, where):
            live = d > 0
            cnt[m[live]] += d[live]
        out_off = np.zeros(len(union) + 1, dtype=np.int64)
        np.cumsum(cnt, out=out_off[1:])
        out = np.empty(int(out_off[-1]), dtype=np.uint32)
        cursor = out_off[:-1].copy()
        for k, (s, m, al, sdf) in enumerate(zip(segs, where, alive, dfs)):
            live = sdf > 0
            dest_start = np.zeros(len(s.hashes), dtype=np.int64)
            dest_start[live] = cursor[m[live]]
            cursor[m[live]] += sdf[live]
            all_alive = s.dead_slots == 0
            shift = np.uint32(int(new_base[k]) << _TF_BITS)
            remap = None if all_alive else (np.cumsum(al) - 1 + int(new_base[k])).astype(np.uint32)
            df = sdf.astype(np.int64)
            t_bounds = np.searchsorted(s.offsets, np.arange(0, len(s.postings), _BLOCK), side="right") - 1
            t_bounds = np.unique(np.r_[t_bounds, len(s.hashes)].clip(0, len(s.hashes)))
            for t0, t1 in zip(t_bounds[:-1].tolist(), t_bounds[1:].tolist()):
                a, b = int(s.offsets[t0]), int(s.offsets[t1])
                vals = s.postings[a:b]
                if all_alive:
                    vals = vals + shift
                else:
                    slot = vals >> _TF_BITS
                    keep = al[slot]
                    vals = (remap[slot[keep]] << _TF_BITS) | (vals[keep] & _TF_MAX)  # type: ignore[index]
                d = df[t0:t1]
                kstart = np.cumsum(d) - d
                dest = np.repeat(dest_start[t0:t1] - kstart, d) + np.arange(len(vals), dtype=np.int64)
                out[dest] = vals
        files, starts, fpost = [], [0], []
        for s, al in zip(segs, alive):
            for fi, fid in enumerate(s.file_ids):
                if fi not in s.dead_files:
                    lo, hi = s.file_range(fi)
                    files.append(fid)
                    starts.append(starts[-1] + hi - lo)
                    fpost.append(int(s.file_postings[fi]))
        lens = np.concatenate([s.lens[al] for s, al in zip(segs, alive)])
        if all(s.uuids is not None for s in segs):
            uuids = np.concatenate([s.uuids[al] for s, al in zip(segs, alive)])  # type: ignore[index]
            id_offsets = id_blob = None
        else:
            uuids = None
            enc = [cid.encode("utf-8") for s, al in zip(segs, alive)
                   for cid, ok in zip(s.chunk_ids(), al.tolist()) if ok]
            id_offsets = np.r_[0, np.cumsum([len(e) for e in enc], dtype=np.int64)].astype(np.uint32)
            id_blob = b"".join(enc)
        merged = _Segment(self._new_name(), files, np.array(starts, dtype=np.uint32),
                          np.array(fpost, dtype=np.uint32), lens, union[cnt > 0],
                          out_off[np.r_[True, cnt > 0]].astype(np.uint32) if len(union) else np.zeros(1, np.uint32),
                          out, uuids, id_offsets, id_blob)
        at = self._segments.index(segs[0])
        for s in segs:
            self._segments.remove(s)
            self._forget(s)
        self._segments.insert(at, merged)
        for fi, fid in enumerate(files):
            self._files[fid] = (merged, fi)
        if merged.durable:
            self._unsaved.add(merged.name)
        return at

    # -- queries -------------------------------------------------------------------------

    def _lookup(self, keys: list[str]) -> list[tuple[int, list[tuple[_Segment, int, int]]]]:
        """Per key: (live df over all segments, [(segment, start, end) of its posting runs])."""
        out: list[tuple[int, list[tuple[_Segment, int, int]]]] = [(0, []) for _ in keys]
        dfs = [0] * len(keys)
        runs: list[list[tuple[_Segment, int, int]]] = [[] for _ in keys]
        hashes = term_hashes(keys)
        for seg in self._segments:
            idx, pos = seg.find(hashes)
            if not len(pos):
                continue
            starts = seg.offsets[idx]
            ends = seg.offsets[idx + 1]
            live = seg.df[idx] if seg.df is not None else ends - starts
            for k, d, a, b in zip(pos.tolist(), live.tolist(), starts.tolist(), ends.tolist()):
                if d > 0:
                    dfs[k] += d
                    runs[k].append((seg, a, b))
        for k in range(len(keys)):
            out[k] = (dfs[k], runs[k])
        return out

    def _gather(self, runs: list[tuple[_Segment, int, int]]) -> tuple[np.ndarray, np.ndarray]:
        """Global slots (int64, ascending) and tfs (float64) of a term's posting runs."""
        if len(runs) == 1:
            seg, a, b = runs[0]
            p = seg.postings[a:b]
            slots = (p >> _TF_BITS).astype(np.int64)
            if seg.base:
                slots += seg.base
        else:
            p = np.concatenate([seg.postings[a:b] for seg, a, b in runs])
            slots = (p >> _TF_BITS).astype(np.int64)
            slots += np.repeat(np.array([seg.base for seg, _, _ in runs], dtype=np.int64),
                               [b - a for _, a, b in runs])
        return slots, (p & _TF_MAX).astype(np.float64)

    def _allowed(self, file_ids: set[str] | None) -> np.ndarray | None | bool:
        """Slot mask of live (and allowed) chunks; None = every slot; False = nothing allowed."""
        if file_ids is None:
            return self._alive[: self._n_slots] if self._dead_total else None
        mask = np.zeros(self._n_slots, dtype=bool)
        anything = False
        for f in file_ids:
            entry = self._files.get(f)
            if entry is not None:
                seg, fi = entry
                lo, hi = seg.file_range(fi)
                mask[seg.base + lo : seg.base + hi] = True
                anything = anything or hi > lo
        return mask if anything else False

    def search(self, query: str, top_k: int, file_ids: set[str] | None = None) -> list[KeywordHit]:
        """Top ``top_k`` chunks for ``query``, best first, scores > 0 only; ``file_ids`` limits
        the results to those files (df, N and avgdl stay those of the whole index).

        Exact top-k with MaxScore pruning, as ``BM25Index.search``: terms are scored rarest
        first; once the terms left cannot lift an unseen chunk above the current k-th score,
        they are only looked up (by binary search) for the chunks that can still make it.
        Equal scores are ordered by slot (insertion order)."""
        if top_k <= 0 or self._n == 0:
            return []
        qterms = query_terms(query)
        if not qterms:
            return []
        mask = self._allowed(file_ids)
        if mask is False:
            return []
        terms = list(qterms)
        looked = self._lookup(terms + [HEADING_FIELD + t for t in terms])
        body = dict(zip(terms, looked[: len(terms)]))
        head = dict(zip(terms, looked[len(terms) :]))
        n = self._n
        avgdl = self._total_len / n if self._total_len else 0.0
        found = []
        for term, share in qterms.items():
            bdf, hdf = body[term][0], head[term][0]
            if bdf or hdf:
                found.append((min(bdf or _ABSENT, hdf or _ABSENT), term, share, bdf, hdf))
        if not found:
            return []
        found.sort(key=itemgetter(0, 1))
        del found[MAX_QUERY_TERMS:]  # a pasted page: keep its rarest terms
        plist: list[tuple[int, str, list, float, float, float]] = []  # (df, key, runs, weight, norm, coef)
        for _, term, share, df, hdf in found:
            k1, b = bm25_params(term, self.k1, self.b)
            k1p1 = k1 + 1.0
            if df:
                coef = k1 * b / avgdl if avgdl else 0.0
                plist.append((df, term, body[term][1], share * idf(n, df) * k1p1, k1 * (1.0 - b), coef))
            if hdf:
                weight = share * HEADING_WEIGHT * idf(n, max(df, hdf)) * k1p1
                plist.append((hdf, HEADING_FIELD + term, head[term][1], weight, k1, 0.0))
        plist.sort(key=itemgetter(0, 1))  # rarest first; ties by term: deterministic
        dense = self._scores
        touched: list[np.ndarray] = []
        try:
            cands = self._score(plist, top_k, mask, touched)  # type: ignore[arg-type]
            scores = dense[cands]
            positive = scores > 0.0
            cands, scores = cands[positive], scores[positive]
            if len(cands) > top_k:
                kth = np.partition(scores, len(scores) - top_k)[len(scores) - top_k]
                sel = scores >= kth
                cands, scores = cands[sel], scores[sel]
            order = np.lexsort((cands, -scores))[:top_k]
            best, best_scores = cands[order], scores[order]
        finally:
            for t in touched:
                dense[t] = 0.0
        if not len(best):
            return []
        weights = {t: share * idf(n, body[t][0]) for t, share in qterms.items()}
        return self._hits(best, best_scores, weights, body, head)

    def _score(self, plist: list[tuple[int, str, list, float, float, float]], top_k: int,
               mask: np.ndarray | None, touched: list[np.ndarray]) -> np.ndarray:
        """MaxScore over ``plist``: accumulates into the scratch ``self._scores`` and returns the
        candidate slots that can still be in the top k (each slot first seen goes to ``touched``)."""
        dense = self._scores
        lens = self._lens
        rest = [0.0] * (len(plist) + 1)  # rest[i]: upper bound of terms i.. (tf/(tf+K) < 1)
        for i in range(len(plist) - 1, -1, -1):
            rest[i] = rest[i + 1] + plist[i][3]
        cands = np.zeros(0, dtype=np.int64)
        theta = 0.0
        i = 0
        while i < len(plist):
            if len(cands) >= top_k and i > 0:
                theta = float(np.partition(dense[cands], len(cands) - top_k)[len(cands) - top_k])
                if rest[i] < theta:
                    break  # no unseen chunk can reach the top k any more
            _, _, runs, w, norm, coef = plist[i]
            slots, tf = self._gather(runs)
            if mask is not None:
                keep = mask[slots]
                slots, tf = slots[keep], tf[keep]
            contrib = w * tf / (tf + norm + coef * lens[slots])
            first_seen = slots[dense[slots] == 0.0]  # contributions are > 0
            touched.append(first_seen)
            cands = np.concatenate([cands, first_seen]) if len(cands) else first_seen
            dense[slots] += contrib
            i += 1
        for j in range(i, len(plist)):
            # keep only chunks that can still reach theta; the others cannot enter the top k
            cands = cands[dense[cands] + rest[j] >= theta]
            if not len(cands):
                break
            _, _, runs, w, norm, coef = plist[j]
            if len(cands) * _LOOKUP_RATIO > sum(b - a for _, a, b in runs):
                # one pass; a chunk with no score yet is no candidate, and one pruned earlier
                # is not in ``cands`` any more, so what it gets here is never read
                slots, tf = self._gather(runs)
                keep = dense[slots] > 0.0
                slots, tf = slots[keep], tf[keep]
                dense[slots] += w * tf / (tf + norm + coef * lens[slots])
                if len(cands) >= top_k:
                    theta = max(theta, float(np.partition(dense[cands], len(cands) - top_k)[len(cands) - top_k]))
                continue
            cands.sort()
            for seg, a, b in runs:
                lo, hi = np.searchsorted(cands, [seg.base, seg.base + seg.n_slots]).tolist()
                if lo == hi:
                    continue
                mine = cands[lo:hi]
                p = seg.postings[a:b]
                key = (mine - seg.base).astype(np.uint32) << np.uint32(_TF_BITS)
                pos = np.searchsorted(p, key)
                inside = pos < len(p)
                pos, mine, key = pos[inside], mine[inside], key[inside]
                v = p[pos]
                hit = (v >> _TF_BITS) == (key >> _TF_BITS)
                if hit.any():
                    s = mine[hit]
                    tf = (v[hit] & _TF_MAX).astype(np.float64)
                    dense[s] += w * tf / (tf + norm + coef * lens[s])
            if len(cands) >= top_k:
                theta = max(theta, float(np.partition(dense[cands], len(cands) - top_k)[len(cands) - top_k]))
        return cands

    def _where(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(segment position, local slot) of global slots."""
        bases = np.array([s.base for s in self._segments], dtype=np.int64)
        segpos = np.searchsorted(bases, slots, side="right") - 1
        return segpos, slots - bases[segpos]

    def _hits(self, best: np.ndarray, scores: np.ndarray, weights: dict[str, float], body: dict,
              head: dict) -> list[KeywordHit]:
        segpos, local = self._where(best)
        total = sum(weights.values())
        covs: list[tuple[float, float]]
        if total <= 0.0:
            covs = [(0.0, 0.0)] * len(best)
        else:
            # a query term occurs in a hit's body / heading iff the hit has a posting for it
            order = np.argsort(best)
            sorted_best = best[order]
            in_body = np.zeros((len(weights), len(best)), dtype=bool)
            in_any = np.zeros((len(weights), len(best)), dtype=bool)
            for k, term in enumerate(weights):
                for runs, rows in ((body[term][1], (in_body, in_any)), (head[term][1], (in_any,))):
                    for seg, a, b in runs:
                        lo, hi = np.searchsorted(sorted_best, [seg.base, seg.base + seg.n_slots]).tolist()
                        if lo == hi:
                            continue
                        p = seg.postings[a:b]
                        key = (sorted_best[lo:hi] - seg.base).astype(np.uint32) << np.uint32(_TF_BITS)
                        pos = np.searchsorted(p, key)
                        ok = pos < len(p)
                        ok[ok] = (p[pos[ok]] >> _TF_BITS) == (key[ok] >> _TF_BITS)
                        for row in rows:
                            row[k, order[lo:hi][ok]] = True
            wl = list(weights.values())
            covs = [(sum([w for w, x in zip(wl, anyc) if x]) / total, sum([w for w, x in zip(wl, bodyc) if x]) / total)
                    for anyc, bodyc in zip(in_any.T.tolist(), in_body.T.tolist())]
        out = []
        for sp, lc, sc, (cov, bcov) in zip(segpos.tolist(), local.tolist(), scores.tolist(), covs):
            seg = self._segments[sp]
            fi = int(np.searchsorted(seg.file_starts, lc, side="right")) - 1
            out.append(KeywordHit(seg.chunk_id(lc), seg.file_ids[fi], sc, cov, bcov))
        return out

    def term_weights(self, query: str) -> dict[str, float]:
        """BM25 idf of each distinct query term times its share (``query_terms``); a term no
        chunk contains gets the largest idf. As ``BM25Index.term_weights``."""
        qterms = query_terms(query)
        terms = list(qterms)
        looked = self._lookup(terms)
        return {t: share * idf(self._n, looked[k][0]) for k, (t, share) in enumerate(qterms.items())}

    # -- inspection ----------------------------------------------------------------------

    def document_frequency(self, term: str) -> int:
        """Live chunks whose body has ``term`` (an index term, e.g. from ``tokenize``)."""
        return self._lookup([term])[0][0]

    def __len__(self) -> int:
        return self._n

    def __contains__(self, file_id: object) -> bool:
        return file_id in self._files

    def file_ids(self) -> set[str]:
        return set(self._files)

    def chunk_count(self, file_id: str) -> int:
        """Chunks of an indexed file; 0 if it is not indexed (``in`` tells the two apart)."""
        entry = self._files.get(file_id)
        if entry is None:
            return 0
        seg, fi = entry
        lo, hi = seg.file_range(fi)
        return hi - lo

    def stats(self) -> dict[str, float]:
        """Counts for logging: chunks, files, segments, terms (summed over segments' term
        tables), postings (stored, incl. dead), dead slots, bytes in memory, avgdl."""
        return {
            "chunks": self._n,
            "files": len(self._files),
            "segments": len(self._segments),
            "terms": sum(len(s.hashes) for s in self._segments),
            "postings": sum(len(s.postings) for s in self._segments),
            "dead_slots": self._dead_total,
            "bytes": sum(s.memory() for s in self._segments) + self._lens.nbytes + self._alive.nbytes
            + self._scores.nbytes + 120 * len(self._files),
            "avgdl": self._total_len / self._n if self._n else 0.0,
        }

    # -- persistence ---------------------------------------------------------------------

    def take_changes(self, everything: bool = False) -> IndexChanges:
        """The persisted segments built since the last call (all of them if ``everything``:
        after a failed write, or for a fresh store), the persisted segments no longer
        referenced, and the manifest of the persisted segments. Write new segments, then the
        manifest, then delete the dropped ones. Segments held in memory only are not in it:
        after a restart, their files are the ones that have a record but are not indexed."""
        new: dict[str, bytes] = {}
        for seg in self._segments:
            if seg.durable and (everything or seg.name in self._unsaved):
                new[seg.name] = seg.to_bytes()
                self._persisted.add(seg.name)
        self._unsaved.clear()
        dropped, self._dropped = self._dropped, []
        listed = [{"name": s.name, "bytes": s.nbytes, "crc": s.crc, "dead": sorted(s.dead_files)}
                  for s in self._segments if s.durable]
        changed = everything or listed != self._listed
        self._listed = listed
        body = {"k1": self.k1, "b": self.b, "terms": TERMS_VERSION, "token": self._token, "next": self._next,
                "segments": listed}
        raw = json.dumps(body, separators=(",", ":")).encode("utf-8")
        return IndexChanges(new, dropped, _MANIFEST_MAGIC + bytes([_FORMAT_VERSION]) + zlib.compress(raw, 6), changed)

    @staticmethod
    def _read_manifest(manifest: bytes) -> dict:
        if not isinstance(manifest, (bytes, bytearray, memoryview)):
            raise ValueError(f"index manifest must be bytes, not {type(manifest).__name__}")
        manifest = bytes(manifest)
        if len(manifest) < 5 or manifest[:4] != _MANIFEST_MAGIC:
            raise ValueError("not a LucidRAG keyword-index manifest")
        if manifest[4] != _FORMAT_VERSION:
            raise ValueError(f"unsupported keyword-index manifest version {manifest[4]}")
        try:
            body = json.loads(zlib.decompress(manifest[5:]).decode("utf-8"))
            segs = body["segments"]
            ok = isinstance(segs, list) and all(
                isinstance(s, dict) and isinstance(s["name"], str) and type(s["bytes"]) is int
                and type(s["crc"]) is int and isinstance(s["dead"], list)
                and all(type(d) is int for d in s["dead"]) for s in segs)
            ok = ok and isinstance(body["token"], str) and type(body["next"]) is int
            float(body["k1"]), float(body["b"])
        except (zlib.error, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"corrupt keyword-index manifest: {type(exc).__name__}: {exc}") from None
        if not ok or len({s["name"] for s in segs}) != len(segs):
            raise ValueError("corrupt keyword-index manifest: bad segment list")
        if body.get("terms", 1) != TERMS_VERSION:  # the tokeniser changed: the files are indexed again
            raise ValueError(f"keyword index of tokeniser version {body.get('terms', 1)}, not {TERMS_VERSION}")
        return body

    @staticmethod
    def manifest_segment_names(manifest: bytes) -> list[str]:
        """The segment blobs a manifest needs (``ValueError`` if it is not one)."""
        return [s["name"] for s in SegmentIndex._read_manifest(manifest)["segments"]]

    @classmethod
    def load(cls, manifest: bytes, segments: dict[str, bytes]) -> SegmentIndex:
        """The index a manifest describes, from its segment blobs (``np.frombuffer``: the arrays
        are views of the blobs). ``ValueError`` on garbage, a missing segment or one whose size
        or CRC-32 differs from the manifest's."""
        body = cls._read_manifest(manifest)
        # a new name token: a crash between writing a segment and the manifest leaves a segment
        # the manifest does not name, which must not share a name with one built from now on
        idx = cls(k1=float(body["k1"]), b=float(body["b"]))
        idx._listed = body["segments"]
        for entry in body["segments"]:
            name = entry["name"]
            blob = segments.get(name)
            if blob is None:
                raise ValueError(f"keyword-index segment {name} is missing")
            if not isinstance(blob, bytes):
                blob = bytes(blob)
            if len(blob) != entry["bytes"] or zlib.crc32(blob) != entry["crc"]:
                raise ValueError(f"keyword-index segment {name} does not match the manifest")
            seg = _Segment.from_bytes(name, blob)
            seg.crc, seg.nbytes, seg.durable = entry["crc"], entry["bytes"], True
            dead = set(entry["dead"])
            if any(not 0 <= d < seg.n_files for d in dead):
                raise ValueError(f"keyword-index segment {name}: bad tombstone")
            if dead:
                seg.dead_files = dead
                alive = seg.alive()
                seg.dead_slots = int(seg.n_slots - alive.sum())
                dead_df = seg.dead_df(alive)
                seg.live_df()[:] -= dead_df.astype(np.int32)
                seg.dead_postings = int(dead_df.sum())
            for fi, fid in enumerate(seg.file_ids):
                if fi in dead:
                    continue
                if fid in idx._files:
                    raise ValueError(f"keyword-index file {fid!r} is in two segments")
                idx._files[fid] = (seg, fi)
            idx._segments.append(seg)
            idx._persisted.add(name)
        idx._relayout()
        idx._n = int(idx._alive[: idx._n_slots].sum())
        idx._total_len = int(idx._lens[: idx._n_slots][idx._alive[: idx._n_slots]].sum(dtype=np.int64))
        return idx
