"""Index terms for keyword retrieval on every vector backend: a CJK-aware tokeniser and BM25 helpers.

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
    * CJK (Han, kana, Hangul) runs, Traditional characters folded to Simplified first
      (``hanfold.FOLD``: a question in either script meets text in the other): overlapping
      character bigrams; a run of length one gives the character itself. Documents
      (``query=False``) additionally index every Han/katakana/Hangul character as a unigram
      (not hiragana, not the stop characters 的 了 是 ...), so a one-character query ("书", or "用Python写" → "用", "写") still finds a character that sits
      inside a longer run. Queries use bigrams for runs of two or more characters, plus the
      unigrams with weight ``QUERY_CJK_UNIGRAM_WEIGHT`` (``query_terms``).

``query_terms(text) -> {term: share}``
    What ``search`` and ``term_weights`` score: the forms of one code share a weight
    (1/k**CODE_SHARE_EXPONENT each), CJK query unigrams carry QUERY_CJK_UNIGRAM_WEIGHT.
``stem(word) -> str``
    The suffix stripper alone (lower-case ASCII word in, index key out).
``tokenize_chunks(chunks) -> list[TokenizedChunk]``
    ``[(chunk_id, text[, heading])] -> [(chunk_id, {token: tf})]``; what ``add_tokenized``
    takes. A heading line is indexed as its own field (terms prefixed ``HEADING_FIELD``).
Scoring helpers
---------------
``TERMS_VERSION`` names this tokeniser's output: an index built by another (stored by an earlier
release) is not loaded but built again from the records (``segindex``).
``bm25_params(term, k1, b)`` gives a CJK term its own BM25 parameters (``CJK_BM25_K1``, ``_B``).
``idf(n, df)`` is shared with the segment index (``lucidrag.index.segindex``); ``MAX_QUERY_TERMS``
bounds a query's terms. The reference BM25 index the segment index is tested against, and the
coverage it is checked by (re-tokenising a hit's text), live in ``tests/reference_bm25.py``.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

from lucidrag.index.hanfold import FOLD

__all__ = [
    "MAX_QUERY_TERMS",
    "TERMS_VERSION",
    "TokenizedChunk",
    "bm25_params",
    "idf",
    "query_terms",
    "stem",
    "tokenize",
    "tokenize_chunks",
]

# The terms tokenize() gives for a text: raised whenever a change gives other terms for a text an
# index may already hold (2: Traditional characters folded to Simplified).
TERMS_VERSION = 2

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

# The heading field (a chunk's title / heading path) is indexed under prefixed terms and scored
# as its own BM25F-style field: weight HEADING_WEIGHT of a body match, idf from the larger of
# the term's body and heading document frequencies (a title shared by every chunk of a manual
# is as common as it is), no length normalisation (headings are short) and not counted in the
# body's length. So a term present in every chunk's title cannot outweigh the body match, yet
# still tells one file from another. Weights 0.3 / 0.5 / 1.0 measured in docs/BENCHMARKS.md.
HEADING_FIELD = "\x01"
HEADING_WEIGHT = 1.0
QUERY_CJK_UNIGRAM_WEIGHT = 1.0  # see query_terms(); measured in docs/BENCHMARKS.md
CODE_SHARE_EXPONENT = 0.5  # the k forms of one code each carry 1/k**CODE_SHARE_EXPONENT; see query_terms()


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


def _word_tokens(tok: str) -> tuple[str, ...]:
    """Terms of one Latin/digit match (a word or a code joined by - _ .)."""
    if tok in _EN_STOP:
        return ()
    out: list[str] = []
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
    return tuple(out)


# hiragana is mostly particles and inflections: no hiragana unigrams in documents
_NO_DOC_UNIGRAM = _CJK_STOP_CHARS | frozenset(chr(c) for c in range(0x3040, 0x30A0))


def _cjk_bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


# Terms of a CJK run of two or more characters (documents and queries alike). Overlapping
# bigrams; bench/bench_retrieval.py --cjk-segmenter measures a dictionary segmenter instead.
cjk_terms = _cjk_bigrams


def _tokenize(text: str, query: bool, cache: dict[str, tuple[str, ...]]) -> list[str]:
    if not text:
        return []
    text = unicodedata.normalize("NFKC", text).casefold()
    out: list[str] = []
    extend = out.extend
    unigrams = not query and _DOC_CJK_UNIGRAMS
    for m in _TOKEN_RE.finditer(text):
        run = m.group(1)
        if run is None:
            tok = m.group(2)
            terms = cache.get(tok)
            if terms is None:
                terms = cache[tok] = _word_tokens(tok)
            extend(terms)
        elif len(run) == 1:
            run = run.translate(FOLD)
            if run not in _CJK_STOP_CHARS:
                out.append(run)
        else:
            run = run.translate(FOLD)
            extend(cjk_terms(run))
            if unigrams:
                extend([c for c in run if c not in _NO_DOC_UNIGRAM])
    return out


def query_terms(text: str) -> dict[str, float]:
    """Distinct query terms with the share of a term's weight each one carries.

    The forms one code or mixed token yields ("Zephyr-9" → zephyr-9, zephyr9, zephyr, 9) are
    one piece of evidence, not four: they share one term's weight, so a chunk that merely names
    the product cannot outrank the one that answers. CJK runs give their bigrams (1.0 each) and,
    with weight QUERY_CJK_UNIGRAM_WEIGHT, the unigrams documents are indexed with (questions often
    share only single characters — names, numbers — with the answer sentence).
    """
    out: dict[str, float] = {}
    if not text:
        return out
    text = unicodedata.normalize("NFKC", text).casefold()

    def put(term: str, share: float) -> None:
        if share > out.get(term, 0.0):
            out[term] = share
    for m in _TOKEN_RE.finditer(text):
        run = m.group(1)
        if run is None:
            terms = dict.fromkeys(_word_tokens(m.group(2)))
            for term in terms:
                put(term, 1.0 / len(terms) ** CODE_SHARE_EXPONENT)
        elif len(run) == 1:
            run = run.translate(FOLD)
            if run not in _CJK_STOP_CHARS:
                put(run, 1.0)
        else:
            run = run.translate(FOLD)
            for term in cjk_terms(run):
                put(term, 1.0)
            if QUERY_CJK_UNIGRAM_WEIGHT > 0.0:
                for c in run:
                    if c not in _NO_DOC_UNIGRAM:
                        put(c, QUERY_CJK_UNIGRAM_WEIGHT)
    return out


def tokenize(text: str, *, query: bool = False) -> list[str]:
    """Index terms of ``text`` (see the module docstring). ``query=True`` for search strings."""
    return _tokenize(text, query, {})


def tokenize_chunks(chunks: Iterable[tuple[str, str] | tuple[str, str, str]]) -> list[TokenizedChunk]:
    """``[(chunk_id, text)]`` or ``[(chunk_id, text, heading)]`` → ``[(chunk_id, {token: tf})]``
    in the same order. When ``text`` starts with its ``heading`` line (a chunk's embed text),
    that line is indexed as the heading field (terms prefixed with ``HEADING_FIELD``)."""
    cache: dict[str, tuple[str, ...]] = {}  # per call: words repeat within a file
    out: list[TokenizedChunk] = []
    for item in chunks:
        cid, text = item[0], item[1]
        heading = item[2] if len(item) > 2 else ""  # type: ignore[misc]
        if heading and text.startswith(heading + "\n"):
            text = text[len(heading) + 1 :]
        tfs = Counter(_tokenize(text, False, cache))
        if heading:
            tfs.update(HEADING_FIELD + t for t in set(_tokenize(heading, False, cache)))
        out.append((cid, dict(tfs)))
    return out


MAX_QUERY_TERMS = 48  # distinct query terms scored; longer queries keep their rarest terms

# BM25 (k1, b) of CJK terms (character bigrams and single characters), in place of the index's
# own (1.2, 0.75, which other terms keep): a character repeated in a chunk, or a longer chunk,
# says less about a Chinese sentence than a repeated word about an English paragraph. Keyword
# mode on question → sentence sets: DRCD +0.012, CMRC +0.010 nDCG@10 (hybrid within ±0.001); the
# same parameters for every term cost English abstracts 0.003-0.004 (docs/BENCHMARKS.md).
CJK_BM25_K1 = 0.9
CJK_BM25_B = 0.4
_CJK_START = re.compile(f"[{_CJK}]")


def bm25_params(term: str, k1: float, b: float) -> tuple[float, float]:
    """The (k1, b) a query term is scored with: ``CJK_BM25_K1``, ``CJK_BM25_B`` for a CJK term."""
    return (CJK_BM25_K1, CJK_BM25_B) if _CJK_START.match(term) else (k1, b)


def idf(n: int, df: int) -> float:
    """BM25 idf of a term in ``df`` of ``n`` chunks (shared with ``lucidrag.index.segindex``)."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))
