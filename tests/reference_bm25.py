"""The reference BM25 index: plain-Python, one posting list per term, exact statistics.

Not shipped. The segment index (``lucidrag.index.segindex``) must score exactly like it; the
tests compare the two, and the keyword benchmark measures it beside the segment index.
Per-file tokenised blobs (``encode_tokenized`` / ``decode_tokenized``) and ``normalise_scores``
are kept with it for those tests and benchmarks.
"""

from __future__ import annotations

import heapq
import json
import struct
import sys
import zlib
from array import array
from bisect import bisect_left as _bisect_left
from collections.abc import Iterable, Sequence
from operator import itemgetter

from lucidrag.index.terms import (
    HEADING_FIELD,
    HEADING_WEIGHT,
    MAX_QUERY_TERMS,
    TokenizedChunk,
    bm25_params,
    idf,
    query_terms,
    tokenize,
    tokenize_chunks,
)

_idf = idf

# --------------------------------------------------------------------------------------------
# Per-file blobs
# --------------------------------------------------------------------------------------------

_CHUNKS_MAGIC = b"LRKT"
_INDEX_MAGIC = b"LRBM"
FORMAT_VERSION = 1


def encode_tokenized(chunks: Sequence[TokenizedChunk]) -> bytes:
    """Compact blob of one file's tokenised chunks: magic, version byte, zlib(JSON)."""
    payload = [[cid, tfs] for cid, tfs in chunks]
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return _CHUNKS_MAGIC + bytes([FORMAT_VERSION]) + zlib.compress(body, 6)


def decode_tokenized(blob: bytes) -> list[TokenizedChunk]:
    """Inverse of ``encode_tokenized``. Raises ``ValueError`` for anything else."""
    data = _unwrap(blob, _CHUNKS_MAGIC, "tokenised-chunks blob")
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"corrupt tokenised-chunks blob: {exc}") from None
    out: list[TokenizedChunk] = []
    if not isinstance(payload, list):
        raise ValueError("corrupt tokenised-chunks blob: not a list")
    for item in payload:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], dict)):
            raise ValueError("corrupt tokenised-chunks blob: bad chunk entry")
        tfs = item[1]
        for tf in tfs.values():
            if type(tf) is not int or tf <= 0:
                raise ValueError("corrupt tokenised-chunks blob: bad term frequency")
        out.append((item[0], tfs))
    return out


def _unwrap(blob: bytes, magic: bytes, what: str) -> bytes:
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise ValueError(f"{what} must be bytes, not {type(blob).__name__}")
    blob = bytes(blob)
    if len(blob) < len(magic) + 1 or blob[: len(magic)] != magic:
        raise ValueError(f"not a LucidRAG {what}")
    version = blob[len(magic)]
    if version != FORMAT_VERSION:
        raise ValueError(f"unsupported {what} format version {version} (expected {FORMAT_VERSION})")
    try:
        return zlib.decompress(blob[len(magic) + 1 :])
    except zlib.error as exc:
        raise ValueError(f"corrupt {what}: {exc}") from None


# --------------------------------------------------------------------------------------------
# BM25 index
# --------------------------------------------------------------------------------------------

_TF_BITS = 8
_TF_MASK = (1 << _TF_BITS) - 1
_MAX_SLOTS = 1 << (32 - _TF_BITS)  # 16.7M chunk slots per index
_RENUMBER_MIN_DEAD = 65_536

if array("I").itemsize != 4:  # pragma: no cover - every CPython platform LucidRAG targets
    raise ImportError("the reference BM25 index needs a 4-byte array('I')")


def _runs(slots: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted slots → maximal half-open ranges [lo, hi)."""
    out: list[tuple[int, int]] = []
    for s in sorted(slots):
        if out and out[-1][1] == s:
            out[-1] = (out[-1][0], s + 1)
        else:
            out.append((s, s + 1))
    return out


def coverage(weights: dict[str, float], text: str) -> float:
    """Share (0-1) of the query's idf weight (`BM25Index.term_weights`) whose terms occur in
    `text`, by re-tokenising it: what the segment index computes from its postings."""
    total = sum(weights.values())
    if total <= 0.0:
        return 0.0
    present = set(tokenize(text))
    return sum(w for term, w in weights.items() if term in present) / total


def coverages(weights: dict[str, float], text: str, heading: str = "") -> tuple[float, float]:
    """``coverage`` of the whole chunk text and of its body alone (``text`` without its leading
    ``heading`` line): ``KeywordHit.coverage`` and ``body_coverage``."""
    total = sum(weights.values())
    if total <= 0.0:
        return 0.0, 0.0
    body = text[len(heading) + 1 :] if heading and text.startswith(heading + "\n") else text
    in_body = set(tokenize(body))
    in_all = in_body | set(tokenize(heading)) if body is not text else in_body
    return (sum(w for t, w in weights.items() if t in in_all) / total,
            sum(w for t, w in weights.items() if t in in_body) / total)


class BM25Index:
    """Incremental BM25 (Okapi; idf = ln(1 + (N - df + 0.5) / (df + 0.5))) over chunks by file."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = float(k1)
        self.b = float(b)
        # term -> packed postings (slot << 8 | tf), ascending by slot; an int when df == 1
        self._postings: dict[str, int | array] = {}
        self._slot_chunk: list[str | None] = []  # None = slot of a removed chunk
        self._slot_len = array("I")
        self._slot_file = array("I")
        self._slot_terms = array("I")  # distinct terms per slot (posting count)
        self._files: dict[str, tuple[int, array]] = {}  # file_id -> (file number, slots)
        self._file_names: dict[int, str] = {}
        self._next_file = 0
        self._n = 0  # live chunks
        self._total_len = 0  # sum of live chunk lengths
        self._n_postings = 0

    # -- mutation ------------------------------------------------------------------------

    def add(self, file_id: str, chunks: Sequence[tuple[str, str] | tuple[str, str, str]]) -> None:
        """Index ``[(chunk_id, text)]`` or ``[(chunk_id, text, heading)]`` (see
        ``tokenize_chunks``) as file ``file_id``, replacing any earlier version."""
        self.add_tokenized(file_id, tokenize_chunks(chunks))

    def add_tokenized(self, file_id: str, chunks: Sequence[TokenizedChunk]) -> None:
        """Index already tokenised chunks (``tokenize_chunks`` / ``decode_tokenized``)."""
        self.remove(file_id)
        if len(self._slot_chunk) + len(chunks) > _MAX_SLOTS:
            self.compact()
            if len(self._slot_chunk) + len(chunks) > _MAX_SLOTS:
                raise ValueError(f"keyword index is full ({_MAX_SLOTS} chunks)")
        fnum = self._next_file
        self._next_file += 1
        slots = array("I")
        postings = self._postings
        get = postings.get
        _int, _array, mask = int, array, _TF_MASK
        for chunk_id, tfs in chunks:
            slot = len(self._slot_chunk)  # always above every slot in use: postings stay sorted
            slots.append(slot)
            dl = sum([tf for t, tf in tfs.items() if (len(t) > 1 or t < "\u1100") and t[0] != HEADING_FIELD])
            base = slot << _TF_BITS
            for term, tf in tfs.items():
                packed = base | (tf if tf < mask else mask)
                p = get(term)
                if p is None:
                    postings[term] = packed
                elif p.__class__ is _int:
                    postings[term] = _array("I", (p, packed))
                else:
                    p.append(packed)
            self._slot_chunk.append(chunk_id)
            self._slot_len.append(dl)
            self._slot_file.append(fnum)
            self._slot_terms.append(len(tfs))
            self._n += 1
            self._total_len += dl
            self._n_postings += len(tfs)
        self._files[file_id] = (fnum, slots)
        self._file_names[fnum] = file_id

    def remove(self, file_id: str) -> bool:
        """Drop every chunk of ``file_id``; ``False`` if the file was not indexed.

        Its postings are cut out at once (one pass over the term table; a file's slots are
        contiguous, so each posting list loses one slice found by bisection), so df, N and
        avgdl are exact immediately.
        """
        entry = self._files.pop(file_id, None)
        if entry is None:
            return False
        fnum, slots = entry
        del self._file_names[fnum]
        for slot in slots:
            self._slot_chunk[slot] = None
            self._n -= 1
            self._total_len -= self._slot_len[slot]
            self._n_postings -= self._slot_terms[slot]
        if slots:
            self._purge(_runs(slots))
        dead = len(self._slot_chunk) - self._n
        if dead > max(_RENUMBER_MIN_DEAD, 2 * self._n):
            self.compact()
        return True

    def _purge(self, ranges: list[tuple[int, int]]) -> None:
        bounds = [(lo << _TF_BITS, hi << _TF_BITS) for lo, hi in ranges]
        gmin, gmax = bounds[0][0], bounds[-1][1]
        single = len(bounds) == 1
        postings = self._postings
        drop: list[str] = []
        shrunk: list[str] = []
        _int, bl = int, _bisect_left
        for term, p in postings.items():
            if p.__class__ is _int:
                if gmin <= p < gmax and (single or any(a <= p < b for a, b in bounds)):
                    drop.append(term)
                continue
            if p[-1] < gmin or p[0] >= gmax:
                continue
            for a, b in bounds:
                i = bl(p, a)
                if i < len(p) and p[i] < b:
                    del p[i : bl(p, b, i)]
            if len(p) < 2:
                shrunk.append(term)
        for term in drop:
            del postings[term]
        for term in shrunk:
            p = postings[term]
            if p:
                postings[term] = p[0]
            else:
                del postings[term]

    def compact(self) -> None:
        """Reclaim the slots of removed chunks by renumbering (one pass over all postings).

        Runs by itself when dead slots outnumber twice the live ones (and 65,536); dead slots
        cost ~21 bytes each until then.
        """
        if self._n == len(self._slot_chunk):
            return
        remap = array("I", bytes(4 * len(self._slot_chunk)))
        keep: list[int] = []
        for slot, cid in enumerate(self._slot_chunk):
            if cid is not None:
                remap[slot] = len(keep)
                keep.append(slot)
        bits, mask = _TF_BITS, _TF_MASK
        for term, p in self._postings.items():
            if p.__class__ is int:
                self._postings[term] = (remap[p >> bits] << bits) | (p & mask)
            else:
                self._postings[term] = array(
                    "I", [(remap[v >> bits] << bits) | (v & mask) for v in p]
                )
        self._slot_chunk = [self._slot_chunk[s] for s in keep]
        self._slot_len = array("I", [self._slot_len[s] for s in keep])
        self._slot_file = array("I", [self._slot_file[s] for s in keep])
        self._slot_terms = array("I", [self._slot_terms[s] for s in keep])
        for file_id, (fnum, slots) in self._files.items():
            self._files[file_id] = (fnum, array("I", [remap[s] for s in slots]))

    # -- queries -------------------------------------------------------------------------

    def search(
        self, query: str, top_k: int, file_ids: set[str] | None = None
    ) -> list[tuple[str, float]]:
        """Top ``top_k`` ``(chunk_id, score)`` for ``query``, best first, scores > 0 only.

        ``file_ids`` limits the results to those files (None = all); df, N and avgdl are always
        those of the whole index, so a chunk scores the same with or without the filter.

        Exact top-k with MaxScore pruning: terms are scored rarest first; once the terms left
        cannot lift an unseen chunk above the current k-th score, they are only looked up
        (by bisection) for the chunks that can still make it, instead of scanning their long
        posting lists.
        """
        if top_k <= 0 or self._n == 0:
            return []
        allowed: set[int] | None = None
        if file_ids is not None:
            allowed = {self._files[f][0] for f in file_ids if f in self._files}
            if not allowed:
                return []
        plist = self._fields(query)
        if not plist:
            return []
        plist.sort(key=itemgetter(0, 1))  # rarest first; ties by term: deterministic
        lens = self._slot_len
        fileof = self._slot_file
        bits, mask = _TF_BITS, _TF_MASK
        weights = [entry[3] for entry in plist]
        rest = [0.0] * (len(plist) + 1)  # rest[i]: upper bound of terms i.. (tf/(tf+K) < 1)
        for i in range(len(plist) - 1, -1, -1):
            rest[i] = rest[i + 1] + weights[i]
        scores: dict[int, float] = {}
        get = scores.get
        i = 0
        theta = 0.0
        while i < len(plist):
            if len(scores) >= top_k and i > 0:
                theta = heapq.nlargest(top_k, scores.values())[-1]
                if rest[i] < theta:
                    break  # no unseen chunk can reach the top k any more
            _, _, p, w, norm, coef = plist[i]
            entries: Sequence[int] = (p,) if p.__class__ is int else p
            for v in entries:
                s = v >> bits
                if allowed is not None and fileof[s] not in allowed:
                    continue
                tf = v & mask
                scores[s] = get(s, 0.0) + w * tf / (tf + norm + coef * lens[s])
            i += 1
        for j in range(i, len(plist)):
            # keep only chunks that can still reach theta; the others cannot enter the top k
            scores = {s: sc for s, sc in scores.items() if sc + rest[j] >= theta}
            _, _, p, w, norm, coef = plist[j]
            if p.__class__ is int:
                s = p >> bits
                if s in scores:
                    tf = p & mask
                    scores[s] += w * tf / (tf + norm + coef * lens[s])
            else:
                hi = len(p)
                for s in scores:
                    k = _bisect_left(p, s << bits, 0, hi)
                    if k < hi:
                        v = p[k]
                        if v >> bits == s:
                            tf = v & mask
                            scores[s] += w * tf / (tf + norm + coef * lens[s])
            if len(scores) >= top_k:
                theta = max(theta, heapq.nlargest(top_k, scores.values())[-1])
        if not scores:
            return []
        best = heapq.nlargest(top_k, scores.items(), key=itemgetter(1))
        chunk = self._slot_chunk
        return [(chunk[s], sc) for s, sc in best if sc > 0.0]  # type: ignore[misc]

    def _fields(self, query: str) -> list[tuple[int, str, int | array, float, float, float]]:
        """What ``search`` scores for ``query``: ``(df, field term, postings, weight, norm, coef)``
        per field of each of its rarest MAX_QUERY_TERMS terms (heading terms are their own field);
        a chunk's contribution is ``weight * tf / (tf + norm + coef * length)``."""
        postings = self._postings
        n = self._n
        avgdl = self._total_len / n if self._total_len else 0.0
        found = []  # (df of the rarer field, term, share, body postings, heading postings)
        for term, share in query_terms(query).items():
            p = postings.get(term)
            h = postings.get(HEADING_FIELD + term)
            if p is not None or h is not None:
                found.append((min(_df(p), _df(h)), term, share, p, h))
        found.sort(key=itemgetter(0, 1))
        del found[MAX_QUERY_TERMS:]  # a pasted page: keep its rarest terms
        plist: list[tuple[int, str, int | array, float, float, float]] = []
        for _, term, share, p, h in found:
            k1, b = bm25_params(term, self.k1, self.b)
            k1p1 = k1 + 1.0
            df = _df(p) if p is not None else 0
            if p is not None:
                coef = k1 * b / avgdl if avgdl else 0.0
                plist.append((df, term, p, share * _idf(n, df) * k1p1, k1 * (1.0 - b), coef))
            if h is not None:
                hdf = _df(h)
                weight = share * HEADING_WEIGHT * _idf(n, max(df, hdf)) * k1p1
                plist.append((hdf, HEADING_FIELD + term, h, weight, k1, 0.0))
        return plist

    def term_weights(self, query: str) -> dict[str, float]:
        """BM25 idf of each distinct query term times its share (``query_terms``); a term no
        chunk contains gets the largest idf."""
        n = self._n
        weights: dict[str, float] = {}
        for term, share in query_terms(query).items():
            p = self._postings.get(term)
            df = 0 if p is None else 1 if p.__class__ is int else len(p)
            weights[term] = share * _idf(n, df)
        return weights

    def __len__(self) -> int:
        return self._n

    def __contains__(self, file_id: object) -> bool:
        return file_id in self._files

    def file_ids(self) -> set[str]:
        return set(self._files)

    def stats(self) -> dict[str, float]:
        """Counts for logging: chunks, files, terms, postings, dead (reclaimable) slots, avgdl."""
        return {
            "chunks": self._n,
            "files": len(self._files),
            "terms": len(self._postings),
            "postings": self._n_postings,
            "dead_slots": len(self._slot_chunk) - self._n,
            "avgdl": self._total_len / self._n if self._n else 0.0,
        }

    # -- serialisation -------------------------------------------------------------------
    # LRBM, version byte, zlib( u32 header length, header JSON, postings ). The header holds
    # k1, b, per-slot chunk id / file index / length / distinct-term count, file ids, terms and
    # each term's posting count; postings are the concatenated little-endian uint32 entries.
    # zlib's checksum rejects a damaged blob; the structure is checked on load.

    def to_bytes(self) -> bytes:
        """Serialise the whole index (compacts it first)."""
        self.compact()
        fnums = sorted({fnum for fnum, _ in self._files.values()})
        findex = {fnum: i for i, fnum in enumerate(fnums)}
        terms = list(self._postings)
        counts = []
        parts = array("I")
        for term in terms:
            p = self._postings[term]
            if p.__class__ is int:
                parts.append(p)
                counts.append(1)
            else:
                parts.extend(p)
                counts.append(len(p))
        if sys.byteorder == "big":  # pragma: no cover
            parts.byteswap()
        header = {
            "k1": self.k1,
            "b": self.b,
            "files": [self._file_names[f] for f in fnums],
            "chunks": self._slot_chunk,
            "file_of": [findex[f] for f in self._slot_file],
            "lens": self._slot_len.tolist(),
            "nterms": self._slot_terms.tolist(),
            "terms": terms,
            "df": counts,
        }
        hb = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        body = struct.pack("<I", len(hb)) + hb + parts.tobytes()
        return _INDEX_MAGIC + bytes([FORMAT_VERSION]) + zlib.compress(body, 1)

    @classmethod
    def from_bytes(cls, blob: bytes) -> BM25Index:
        """Inverse of ``to_bytes``; ``ValueError`` on anything it did not write."""
        data = _unwrap(blob, _INDEX_MAGIC, "keyword index")
        try:
            return cls._load(data)
        except ValueError as exc:
            raise ValueError(f"corrupt keyword index: {exc}") from None
        except (KeyError, TypeError, IndexError, OverflowError, struct.error) as exc:
            raise ValueError(f"corrupt keyword index: {type(exc).__name__}: {exc}") from None

    @classmethod
    def _load(cls, data: bytes) -> BM25Index:
        (hlen,) = struct.unpack_from("<I", data, 0)
        header = json.loads(data[4 : 4 + hlen].decode("utf-8"))
        if not isinstance(header, dict):
            raise ValueError("header is not an object")
        raw = data[4 + hlen :]
        if len(raw) % 4:
            raise ValueError("truncated postings")
        parts = array("I")
        parts.frombytes(raw)
        if sys.byteorder == "big":  # pragma: no cover
            parts.byteswap()
        files, chunks, file_of = header["files"], header["chunks"], header["file_of"]
        lens, nterms, terms, dfs = header["lens"], header["nterms"], header["terms"], header["df"]
        nslots = len(chunks)
        if not (len(file_of) == len(lens) == len(nterms) == nslots and len(terms) == len(dfs)):
            raise ValueError("inconsistent lengths")
        if sum(dfs) != len(parts) or any(type(d) is not int or d < 1 for d in dfs):
            raise ValueError("posting counts do not match")
        if parts and (max(parts) >> _TF_BITS) >= nslots:
            raise ValueError("posting refers to a missing chunk")
        if not all(isinstance(c, str) for c in chunks) or not all(isinstance(f, str) for f in files):
            raise ValueError("ids must be strings")
        if not all(isinstance(t, str) for t in terms) or len(set(terms)) != len(terms):
            raise ValueError("bad term list")
        if len(set(files)) != len(files):
            raise ValueError("duplicate file ids")
        idx = cls(k1=float(header["k1"]), b=float(header["b"]))
        idx._slot_chunk = list(chunks)
        idx._slot_len = array("I", lens)
        idx._slot_terms = array("I", nterms)
        idx._slot_file = array("I", file_of)
        file_slots: list[array] = [array("I") for _ in files]
        for slot, fi in enumerate(file_of):
            file_slots[fi].append(slot)  # IndexError → ValueError above
        for i, f in enumerate(files):
            idx._files[f] = (i, file_slots[i])
            idx._file_names[i] = f
        idx._next_file = len(files)
        pos = 0
        postings: dict[str, int | array] = {}
        for term, d in zip(terms, dfs):
            postings[term] = parts[pos] if d == 1 else parts[pos : pos + d]
            pos += d
        idx._postings = postings
        idx._n = nslots
        idx._total_len = sum(idx._slot_len)
        idx._n_postings = len(parts)
        if sum(idx._slot_terms) != len(parts):
            raise ValueError("posting counts do not match the chunks")
        return idx


def _df(postings: int | array | None) -> int:
    """Document frequency of a posting entry; a term absent from the field ranks last."""
    if postings is None:
        return 1 << 62
    return 1 if postings.__class__ is int else len(postings)


def normalise_scores(results: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """Scale scores so the best is 1.0 (order kept); BM25 has no fixed upper bound."""
    if not results:
        return []
    top = max(score for _, score in results)
    if top <= 0:
        return [(cid, 0.0) for cid, _ in results]
    return [(cid, score / top) for cid, score in results]
