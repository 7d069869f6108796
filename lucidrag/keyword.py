"""Keyword retrieval that works on every vector backend: a CJK-aware tokeniser and a BM25 index.

The host's own ``full_text`` search is a case-sensitive substring match on Chroma only, so the
engine keeps its own inverted index, derived from the chunks it stored (see DESIGN.md). Pure
standard library; no I/O; mutate an index from one thread (the event loop) at a time.

API
---
``tokenize(text, *, query=False) -> list[str]``
    NFKC + case-fold, then

    * Latin/digit words. A small English stopword list is dropped and pure-ASCII words get a
      conservative suffix stripper (plural -s/-es/-ies, -ed, -ing, then a final -e / -y
      normalisation) so that "files"/"file", "creating"/"created"/"create",
      "studies"/"study", "settings"/"setting" meet.
    * Codes: a run of letters/digits joined by ``- _ .`` ("ERR-503", "v2.3", "A_1024") is emitted
      whole, with ``-``/``_`` removed when that differs ("err503", so "ERR-503" == "ERR503" ==
      "err_503"), and then its parts one by one. A token mixing letters and digits in at most
      three runs ("a1024", "ipv6", "sha256") also yields those runs ("1024", "ipv", "6").
    * CJK (Han, kana, Hangul) runs: overlapping character bigrams; a run of length one gives the
      character itself. Documents (``query=False``) additionally index every Han/katakana/Hangul
      character as a unigram (not hiragana, not the stop characters 的 了 是 ...), so a one-
      character query ("书", or "用Python写" → "用", "写") still finds a character that sits
      inside a longer run. Queries use only bigrams for runs of two or more characters, so a
      query never touches the long postings of common single characters.

``tokenize_chunks(chunks) -> list[TokenizedChunk]``
    ``[(chunk_id, text)] -> [(chunk_id, {token: tf})]``; what ``add_tokenized`` takes.
``encode_tokenized(chunks) -> bytes`` / ``decode_tokenized(blob) -> list[TokenizedChunk]``
    Per-file blob (one per (KB, file) in plugin storage) so an index can be rebuilt without
    re-tokenising; ``decode_tokenized`` raises ``ValueError`` on anything it did not write.
``BM25Index(k1=1.2, b=0.75)``
    ``add(file_id, [(chunk_id, text)])``; ``add_tokenized(file_id, tokenized)``: (re)place the
    file's chunks (adding an existing ``file_id`` replaces it). ``remove(file_id) -> bool``.
    ``search(query, top_k, file_ids=None) -> [(chunk_id, score)]``: best first, scores > 0
    only; ``file_ids`` restricts the results (corpus statistics stay global).
    ``len(index)`` = live chunks; ``file_ids()``; ``file_id in index``; ``stats()``;
    ``compact()``; ``to_bytes()`` / ``BM25Index.from_bytes(blob)`` (``ValueError`` on garbage).
``normalise_scores(results)``
    Divide by the best score: BM25 → (0, 1], for weighted fusion with vector scores.

Index layout (memory)
---------------------
No chunk text is kept. ``term -> postings`` where postings is a single ``int`` for a term that
occurs in one chunk (most terms, by Zipf) or an ``array('I')`` otherwise; each entry packs
``slot << 8 | min(tf, 255)`` (BM25 saturates long before tf 255). Per slot: chunk id, length
(``array('I')``), file number (``array('I')``), alive flag (``bytearray``). Removing a file only
clears its slots' alive flags and subtracts their lengths: N and avgdl are exact at once, and df
is counted over live postings at query time, so scores equal those of an index built fresh from
the remaining files. Dead postings are purged by ``compact()``, which runs automatically once
they outnumber half the live postings (cost: one pass over all postings), and before
``to_bytes()``.
"""

from __future__ import annotations

import heapq
import json
import math
import re
import struct
import sys
import unicodedata
import zlib
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from operator import itemgetter

__all__ = [
    "BM25Index",
    "TokenizedChunk",
    "decode_tokenized",
    "encode_tokenized",
    "normalise_scores",
    "tokenize",
    "tokenize_chunks",
]

TokenizedChunk = tuple[str, dict[str, int]]
"""(chunk_id, {token: term frequency}) — the tokenised form of one chunk."""

# --------------------------------------------------------------------------------------------
# Tokeniser
# --------------------------------------------------------------------------------------------

# Han (incl. ext. A, compatibility, ext. B+), 々 〇, hiragana, katakana (without the ・ middle
# dot), Hangul syllables and jamo. NFKC has already turned half-width katakana into full-width.
_CJK = (
    "\u1100-\u11ff\u3005\u3007\u3040-\u309f\u30a0-\u30fa\u30fc-\u30ff\u3130-\u318f"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff"
    "\U00020000-\U0003134f"
)
_ALNUM = rf"[^\W_{_CJK}]"
_TOKEN_RE = re.compile(rf"([{_CJK}]+)|({_ALNUM}+(?:[-_.]{_ALNUM}+)*)")
_CONNECTOR_RE = re.compile(r"[-_.]")
_LETTER_DIGIT_RE = re.compile(r"\d+|[^\W\d_]+")

_MAX_TOKEN_LEN = 64  # longer "words" are hashes/base64: keep only their parts

# Lucene's English stop set, plus pronouns, question words and contraction pieces ("don't" →
# "don" "t"); a question's "how/what/which" would otherwise boost chunks that happen to hold them.
_EN_STOP = frozenset(
    """a an and are as at be but by for if in into is it no not of on or such that the their then
    there these they this to was will with i me my we our you your he him his she her its them
    us do does did done can could would should has have had been being am were what which who
    whom when where why how than so too very also just s t d m ll re ve don doesn didn isn
    e.g i.e etc""".split()
)

# Characters never indexed as unigrams (bigrams containing them are kept: "的确", "是否").
_CJK_STOP_CHARS = frozenset("的了是在和与及或也就都而着之其这那个吗呢吧啊把被于")

_DOC_CJK_UNIGRAMS = True  # see the module docstring; the benchmark measures the cost


def _is_hiragana(ch: str) -> bool:
    return "\u3040" <= ch <= "\u309f"


def _undouble(w: str) -> str:
    if len(w) >= 2 and w[-1] == w[-2] and w[-1] not in "aeiouylsz":
        return w[:-1]
    return w


def _has_vowel(w: str) -> bool:
    return any(c in "aeiouy" for c in w)


def stem(word: str) -> str:
    """Conservative, deterministic suffix stripper for a lower-case ASCII word.

    One plural rule (-ies → -i, -sses → -ss, -s unless -ss/-us/-is), then one of -ied → -i,
    -ed (not -eed), -ing (only if a stem of >= 3 letters with a vowel remains, undoubling a
    final consonant: running → run), then a final -e is dropped (len >= 4) or a final
    consonant+y becomes +i. Stems are index keys, not words.
    """
    w = word
    if len(w) <= 3:
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "i"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if w.endswith("ied") and len(w) > 4:
        w = w[:-3] + "i"
    elif w.endswith("ed") and not w.endswith("eed"):
        s = w[:-2]
        if len(s) >= 3 and _has_vowel(s):
            w = _undouble(s)
    elif w.endswith("ing"):
        s = w[:-3]
        if len(s) >= 3 and _has_vowel(s):
            w = _undouble(s)
    if len(w) >= 4 and w.endswith("e"):
        w = w[:-1]
    elif len(w) >= 3 and w.endswith("y") and w[-2] not in "aeiou":
        w = w[:-1] + "i"
    return w


def _simple_word(w: str, out: list[str]) -> None:
    if w in _EN_STOP or len(w) > _MAX_TOKEN_LEN:
        return
    if w.isascii() and w.isalpha():
        out.append(stem(w))
        return
    out.append(w)
    if not w.isdigit() and not w.isalpha():
        runs = _LETTER_DIGIT_RE.findall(w)
        if 1 < len(runs) <= 3:
            out.extend(r for r in runs if r not in _EN_STOP)


def _cjk_run(run: str, out: list[str], query: bool) -> None:
    n = len(run)
    if n == 1:
        if run not in _CJK_STOP_CHARS:
            out.append(run)
        return
    out.extend([run[i : i + 2] for i in range(n - 1)])
    if not query and _DOC_CJK_UNIGRAMS:
        out.extend([c for c in run if c not in _CJK_STOP_CHARS and not _is_hiragana(c)])


def tokenize(text: str, *, query: bool = False) -> list[str]:
    """Index terms of ``text`` (see the module docstring). ``query=True`` for search strings."""
    if not text:
        return []
    text = unicodedata.normalize("NFKC", text).casefold()
    out: list[str] = []
    for m in _TOKEN_RE.finditer(text):
        cjk = m.group(1)
        if cjk is not None:
            _cjk_run(cjk, out, query)
            continue
        tok = m.group(2)
        if tok in _EN_STOP:
            continue
        if "-" in tok or "_" in tok or "." in tok:
            if len(tok) <= _MAX_TOKEN_LEN:
                out.append(tok)
                joined = tok.replace("-", "").replace("_", "")
                if joined != tok:
                    out.append(joined)
            for part in _CONNECTOR_RE.split(tok):
                _simple_word(part, out)
        else:
            _simple_word(tok, out)
    return out


def tokenize_chunks(chunks: Iterable[tuple[str, str]]) -> list[TokenizedChunk]:
    """``[(chunk_id, text)]`` → ``[(chunk_id, {token: tf})]`` in the same order."""
    return [(cid, dict(Counter(tokenize(text)))) for cid, text in chunks]


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
_COMPACT_MIN_DEAD = 65_536

if array("I").itemsize != 4:  # pragma: no cover - every CPython platform LucidRAG targets
    raise ImportError("lucidrag.keyword needs a 4-byte array('I')")


class BM25Index:
    """Incremental BM25 (Okapi; idf = ln(1 + (N - df + 0.5) / (df + 0.5))) over chunks by file."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = float(k1)
        self.b = float(b)
        self._postings: dict[str, int | array] = {}
        self._slot_chunk: list[str | None] = []
        self._slot_len = array("I")
        self._slot_file = array("I")
        self._alive = bytearray()
        self._files: dict[str, tuple[int, array]] = {}  # file_id -> (file number, slots)
        self._file_names: dict[int, str] = {}
        self._next_file = 0
        self._n = 0  # live chunks
        self._total_len = 0  # sum of live chunk lengths
        self._live_postings = 0
        self._dead_postings = 0
        self._slot_terms = array("I")  # distinct terms per slot (for the posting counts)

    # -- mutation ------------------------------------------------------------------------

    def add(self, file_id: str, chunks: Sequence[tuple[str, str]]) -> None:
        """Index ``[(chunk_id, text)]`` as file ``file_id``, replacing any earlier version."""
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
        for chunk_id, tfs in chunks:
            slot = len(self._slot_chunk)
            slots.append(slot)
            dl = 0
            base = slot << _TF_BITS
            for term, tf in tfs.items():
                dl += tf
                packed = base | (tf if tf < _TF_MASK else _TF_MASK)
                p = postings.get(term)
                if p is None:
                    postings[term] = packed
                elif type(p) is int:
                    postings[term] = array("I", (p, packed))
                else:
                    p.append(packed)
            self._slot_chunk.append(chunk_id)
            self._slot_len.append(dl)
            self._slot_file.append(fnum)
            self._alive.append(1)
            self._slot_terms.append(len(tfs))
            self._n += 1
            self._total_len += dl
            self._live_postings += len(tfs)
        self._files[file_id] = (fnum, slots)
        self._file_names[fnum] = file_id

    def remove(self, file_id: str) -> bool:
        """Drop every chunk of ``file_id``; ``False`` if the file was not indexed."""
        entry = self._files.pop(file_id, None)
        if entry is None:
            return False
        fnum, slots = entry
        del self._file_names[fnum]
        for slot in slots:
            self._alive[slot] = 0
            self._slot_chunk[slot] = None
            self._n -= 1
            self._total_len -= self._slot_len[slot]
            self._live_postings -= self._slot_terms[slot]
            self._dead_postings += self._slot_terms[slot]
        if self._dead_postings > max(_COMPACT_MIN_DEAD, self._live_postings // 2):
            self.compact()
        return True

    def compact(self) -> None:
        """Purge dead postings and renumber slots densely (one pass over all postings)."""
        if self._n == len(self._slot_chunk):
            return
        alive = self._alive
        remap = array("I", bytes(4 * len(alive)))
        new = 0
        for slot, ok in enumerate(alive):
            if ok:
                remap[slot] = new
                new += 1
        new_postings: dict[str, int | array] = {}
        for term, p in self._postings.items():
            if type(p) is int:
                s = p >> _TF_BITS
                if alive[s]:
                    new_postings[term] = (remap[s] << _TF_BITS) | (p & _TF_MASK)
                continue
            kept = [(remap[v >> _TF_BITS] << _TF_BITS) | (v & _TF_MASK)
                    for v in p if alive[v >> _TF_BITS]]
            if len(kept) > 1:
                new_postings[term] = array("I", kept)
            elif kept:
                new_postings[term] = kept[0]
        self._postings = new_postings
        keep = [s for s, ok in enumerate(alive) if ok]
        self._slot_chunk = [self._slot_chunk[s] for s in keep]
        self._slot_len = array("I", (self._slot_len[s] for s in keep))
        self._slot_file = array("I", (self._slot_file[s] for s in keep))
        self._slot_terms = array("I", (self._slot_terms[s] for s in keep))
        self._alive = bytearray(b"\x01" * len(keep))
        for file_id, (fnum, slots) in self._files.items():
            self._files[file_id] = (fnum, array("I", (remap[s] for s in slots)))
        self._dead_postings = 0

    # -- queries -------------------------------------------------------------------------

    def search(
        self, query: str, top_k: int, file_ids: set[str] | None = None
    ) -> list[tuple[str, float]]:
        """Top ``top_k`` ``(chunk_id, score)`` for ``query``, best first, scores > 0 only.

        ``file_ids`` limits the results to those files (None = all); df, N and avgdl are always
        those of the whole index, so a chunk scores the same with or without the filter.
        """
        if top_k <= 0 or self._n == 0:
            return []
        allowed: set[int] | None = None
        if file_ids is not None:
            allowed = {self._files[f][0] for f in file_ids if f in self._files}
            if not allowed:
                return []
        terms = list(dict.fromkeys(tokenize(query, query=True)))
        if not terms:
            return []
        n = self._n
        k1 = self.k1
        k1p1 = k1 + 1.0
        norm = k1 * (1.0 - self.b)
        coef = k1 * self.b / (self._total_len / n) if self._total_len else 0.0
        lens = self._slot_len
        fileof = self._slot_file
        alive = self._alive
        has_dead = self._dead_postings > 0
        scores: dict[int, float] = {}
        get = scores.get
        for term in terms:
            p = self._postings.get(term)
            if p is None:
                continue
            entries: Sequence[int] = (p,) if type(p) is int else p
            if has_dead:
                entries = [v for v in entries if alive[v >> _TF_BITS]]
            df = len(entries)
            if df == 0:
                continue
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            w = idf * k1p1
            for v in entries:
                s = v >> _TF_BITS
                if allowed is not None and fileof[s] not in allowed:
                    continue
                tf = v & _TF_MASK
                scores[s] = get(s, 0.0) + w * tf / (tf + norm + coef * lens[s])
        if not scores:
            return []
        best = heapq.nlargest(top_k, scores.items(), key=itemgetter(1))
        chunk = self._slot_chunk
        return [(chunk[s], sc) for s, sc in best if sc > 0.0]  # type: ignore[misc]

    def __len__(self) -> int:
        return self._n

    def __contains__(self, file_id: object) -> bool:
        return file_id in self._files

    def file_ids(self) -> set[str]:
        return set(self._files)

    def stats(self) -> dict[str, float]:
        """Counts for logging: chunks, files, terms, live/dead postings, avgdl."""
        return {
            "chunks": self._n,
            "files": len(self._files),
            "terms": len(self._postings),
            "postings": self._live_postings,
            "dead_postings": self._dead_postings,
            "avgdl": self._total_len / self._n if self._n else 0.0,
        }

    # -- serialisation -------------------------------------------------------------------
    # LRBM, version byte, zlib( u32 header length, header JSON, postings ). The header holds
    # k1, b, per-slot chunk id / file index / length / distinct-term count, file ids, terms and
    # each term's posting count; postings are the concatenated little-endian uint32 entries.

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
            if type(p) is int:
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
        return _INDEX_MAGIC + bytes([FORMAT_VERSION]) + zlib.compress(body, 6)

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
        idx._alive = bytearray(b"\x01" * nslots)
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
        idx._live_postings = len(parts)
        if sum(idx._slot_terms) != len(parts):
            raise ValueError("posting counts do not match the chunks")
        return idx


def normalise_scores(results: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """Scale scores so the best is 1.0 (order kept); BM25 has no fixed upper bound."""
    if not results:
        return []
    top = max(score for _, score in results)
    if top <= 0:
        return [(cid, 0.0) for cid, _ in results]
    return [(cid, score / top) for cid, score in results]
