"""Combining vector and keyword candidate lists into one ranking (pure functions).

Ranking is a convex combination of min-max normalised strengths (cosine for vector candidates;
for keyword candidates, chosen by BM25, the query coverage of the chunk, `by_coverage`), each normalised within its own candidate list for this query; a
chunk missing from a list gets 0 there; the keyword list's weight is lowered per query when it is less confident than the
vector list (`_confidence`), and the top is diversified to one passage per file (`diversify`). Every
choice here is measured on four collections in docs/BENCHMARKS.md (score fusion beat weighted
reciprocal-rank fusion, `bench/lib/rrf.py`, kept for comparison). The reported `score` of a fused hit is the weighted mean of its two absolute
0–1 scores (cosine similarity; keyword query-term coverage), so a threshold means "this similar,
or this strongly matching", in every mode; the order follows the ranking value.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# One-passage-per-file diversity (every mode): a file's second passage ranks behind other files' best
# passages unless its fused rank value beats theirs by more than DIVERSITY_MARGIN (its n-th
# passage: n × the margin), so a file whose two sections both answer keeps both on top, while a
# merely similar second passage does not push another file's answer out of the top K. The strict
# version (margin ∞) was +0.006 / +0.050 nDCG@10 on SciFact / CISI subsets; with a margin of 0.5
# (half the 0-1 rank value range) the benchmark gives up 0.001 on one set, 0.3 gave up 0.003
# (docs/BENCHMARKS.md). In vector and keyword modes alone it gained +0.039 / +0.015 nDCG@10 on
# CISI and +0.008 / +0.008 on SciFact, where a short abstract's two chunks took two of ten places.
# Diversity only breaks near-ties (DIVERSITY_FLOOR, on the absolute 0-1 evidence: the stronger of
# cosine and keyword coverage): a demoted passage never follows one with under half its own
# evidence, nor, when it holds at least half the best, one with under half the best. Without it
# a KB with one relevant file showed an unrelated file's best passage (score ~0) before that
# file's second and third answers. The same floor on the min-max rank value cost CISI 0.013
# nDCG@10, on the reported mean score 0.008; on evidence it costs nothing (docs/BENCHMARKS.md).
FILE_DIVERSITY = True
DIVERSITY_MARGIN = 0.5
DIVERSITY_FLOOR = 0.5
# Document-level evidence (hybrid): a file's best passage ranks FILE_SUPPORT × its second-best
# passage's rank value higher, so of two about equally good passages the one whose file holds
# more of the answer comes first (short abstracts: ~2.7 chunks each). 0.1: nDCG@10 CISI +0.002,
# SciFact subset +0.004; nDCG@5 at top_k 5 +0.008 / +0.009; 0.25 no better; keyword mode alone
# loses 0.003-0.006, so it is not used there (docs/BENCHMARKS.md).
FILE_SUPPORT = 0.1
# Per-query list confidence: how clearly each list's best candidates stand out from the rest of
# its top CONFIDENCE_DEPTH (min-max normalised). It only ever takes weight from the keyword list:
# a keyword list where many chunks tie on a shared term counts for less when the vector list is
# clearer, but a keyword list with one standout never outweighs the vector list. A vector list of
# near-equal cosines is often many passages on the question's topic, and the keyword standout one
# passage sharing a rare word of a long question ("what is hepatitis and how is it transmitted?":
# the one chunk holding "transmitted" beside "hepatitis"); letting it take weight from the vector
# list cost 0.025 / 0.030 nDCG@10 on the FAQ and long-page collections and gained at most 0.006
# elsewhere (docs/BENCHMARKS.md).
CONFIDENCE_WEIGHTING = True
CONFIDENCE_DEPTH = 10
# Keyword strength in the fusion (hybrid): not raw BM25 but how much of the query the chunk
# covers (its reported 0-1 coverage: the share of the query's idf weight whose terms it holds).
# BM25 still picks the keyword candidates. Its term-frequency and length rewards, right for ranking
# by keywords alone, made the keyword half overrule a better vector ranking on sentence collections
# (a short sentence repeating one query term beat the answer that holds more of the question);
# coverage leaves the order among equally matching chunks to the vector half. Measured on four
# collections in docs/BENCHMARKS.md. (Also counting the coverage of a chunk's section neighbours
# was measured: +0.001 CISI, -0.002 SciFact; not kept, it needs every candidate's neighbours.)
# Document-level view (vector candidates, every mode): a passage's vector strength is
# (1 − DOCUMENT_WEIGHT) × its cosine + DOCUMENT_WEIGHT × its file's document cosine (the file's
# title and opening, embedded once at ingest: ingestion/ingest.py), so of two equally worded
# passages the one in the file that is about the question ranks first. A one-chunk file is its own
# document; a file whose document vector the search did not return counts as no better than the
# weakest one it did. The reported score stays the passage's own cosine. Measured in
# docs/BENCHMARKS.md ("Document-level view").
DOCUMENT_WEIGHT = 0.35


@dataclass(frozen=True)
class Candidate:
    chunk_id: str
    score: float  # absolute 0-1 score that is reported and thresholded, higher is better
    strength: float | None = None  # what ranks the list (e.g. raw BM25); defaults to score
    body: float | None = None  # keyword: the match in the chunk's body alone (not its heading)

    @property
    def rank_strength(self) -> float:
        return self.score if self.strength is None else self.strength


@dataclass(frozen=True)
class Fused:
    chunk_id: str
    score: float
    vector_score: float | None
    keyword_score: float | None
    rank_value: float
    body: float = 0.0  # keyword body match: breaks ties of rank_value before the reported score


def fuse(vector: Sequence[Candidate], keyword: Sequence[Candidate], vector_weight: float) -> list[Fused]:
    """Convex combination of min-max normalised strengths; ties go to the better body match,
    then to the higher reported score."""
    keyword_weight = 1.0 - vector_weight
    vector_norm = _min_max(vector)
    keyword_norm = _min_max(keyword)
    if CONFIDENCE_WEIGHTING and vector and keyword:
        cv, ck = _confidence(vector, vector_norm), _confidence(keyword, keyword_norm)
        if cv + ck > 0.0:
            vector_weight = max(vector_weight, vector_weight * cv / (vector_weight * cv + keyword_weight * ck))
            keyword_weight = 1.0 - vector_weight
    vector_score = {c.chunk_id: c.score for c in vector}
    keyword_score = {c.chunk_id: c.score for c in keyword}
    body = {c.chunk_id: c.body or 0.0 for c in keyword}
    fused = [
        Fused(
            chunk_id,
            vector_weight * vector_score.get(chunk_id, 0.0) + keyword_weight * keyword_score.get(chunk_id, 0.0),
            vector_score.get(chunk_id),
            keyword_score.get(chunk_id),
            vector_weight * vector_norm.get(chunk_id, 0.0) + keyword_weight * keyword_norm.get(chunk_id, 0.0),
            body.get(chunk_id, 0.0),
        )
        for chunk_id in dict.fromkeys([c.chunk_id for c in vector] + [c.chunk_id for c in keyword])
    ]
    # Ties (common with short lists, where min-max sends the last candidate to 0, and between
    # chunks that match only through a shared title) go to the better body match, then to the
    # higher absolute score.
    fused.sort(key=lambda f: (f.rank_value, f.body, f.score), reverse=True)
    return fused


def document_scores(passages: Sequence[Candidate], documents: dict[str, float], file_of: dict[str, str],
                    is_single_chunk: Callable[[str], bool]) -> dict[str, float]:
    """File id → its document cosine: `documents` (the files whose document vector the search
    returned); a one-chunk file's own passage; else the weakest document cosine returned (or the
    passage's own, when lower)."""
    weakest = min(documents.values(), default=0.0)
    out = dict(documents)
    for c in passages:
        file_id = file_of[c.chunk_id]
        if file_id not in out:
            out[file_id] = c.score if is_single_chunk(file_id) else min(c.score, weakest)
    return out


def with_document_view(passages: Sequence[Candidate], scores: dict[str, float],
                       file_of: dict[str, str]) -> list[Candidate]:
    """Vector candidates ranked by passage and document evidence (DOCUMENT_WEIGHT); `scores` from
    `document_scores`."""
    weight = DOCUMENT_WEIGHT
    if not weight:
        return list(passages)
    out = [Candidate(c.chunk_id, c.score, (1.0 - weight) * c.score + weight * scores.get(file_of[c.chunk_id], c.score),
                     c.body) for c in passages]
    out.sort(key=lambda c: c.rank_strength, reverse=True)
    return out


def _confidence(candidates: Sequence[Candidate], norm: dict[str, float]) -> float:
    """1 − mean normalised strength of the list's top CONFIDENCE_DEPTH: high when its first
    candidates stand out, low when many are about as good (e.g. a title every chunk shares)."""
    top = sorted((norm[c.chunk_id] for c in candidates), reverse=True)[:CONFIDENCE_DEPTH]
    return 1.0 - sum(top) / len(top) if len(top) > 1 else 0.5


def by_coverage(keyword: Sequence[Candidate]) -> list[Candidate]:
    """Keyword candidates (chosen by BM25) ranked for the fusion by their query coverage (`score`)."""
    ranked = [Candidate(c.chunk_id, c.score, c.score, c.body) for c in keyword]
    ranked.sort(key=lambda c: c.rank_strength, reverse=True)
    return ranked


def diversify(ranked: list[Fused], file_of: dict[str, str], file_support: float = 0.0) -> list[Fused]:
    """One passage per file first (FILE_DIVERSITY): a file's n-th passage (n = 0, 1, ...) ranks as
    if its rank value were n × DIVERSITY_MARGIN lower, so it follows other files' best passages
    unless it beats them by more than that, but never follows a clearly weaker passage
    (`_clearly_weaker_last`). A file's best passage ranks `file_support` × its second-best
    passage's rank value higher (FILE_SUPPORT). `file_of` maps chunk id → file id."""
    if not FILE_DIVERSITY or not ranked:
        return ranked
    second_best: dict[str, float] = {}
    seen_once: set[str] = set()
    for f in ranked:  # best first: a file's second occurrence is its second-best passage
        file_id = file_of.get(f.chunk_id, f.chunk_id)
        if file_id in seen_once:
            second_best.setdefault(file_id, f.rank_value)
        seen_once.add(file_id)
    seen: dict[str, int] = {}
    keyed: list[tuple[float, int, Fused, bool]] = []
    for position, f in enumerate(ranked):
        file_id = file_of.get(f.chunk_id, f.chunk_id)
        n = seen.get(file_id, 0)
        seen[file_id] = n + 1
        key = f.rank_value - n * DIVERSITY_MARGIN if n else f.rank_value + file_support * second_best.get(file_id, 0.0)
        keyed.append((key, -position, f, n > 0))
    keyed.sort(key=lambda k: (k[0], k[1]), reverse=True)
    return _clearly_weaker_last([(f, demoted) for _, _, f, demoted in keyed])


def _clearly_weaker_last(order: list[tuple[Fused, bool]]) -> list[Fused]:
    """Move each demoted passage up to just before the first passage whose evidence is under its
    floor: DIVERSITY_FLOOR × the best evidence when its own is at least that, else × its own.
    Among the passages moved before one, the diversified order is kept. O(n log n)."""
    best = max(_evidence(f) for f, _ in order)

    def floor(f: Fused) -> float:
        own = _evidence(f)
        return DIVERSITY_FLOOR * (best if own >= DIVERSITY_FLOOR * best else own)

    waiting = [(-floor(f), i) for i, (f, demoted) in enumerate(order) if demoted]
    heapq.heapify(waiting)
    placed: set[int] = set()
    out: list[Fused] = []
    for i, (f, _) in enumerate(order):
        if i in placed:
            continue
        moved: list[int] = []
        while waiting and -waiting[0][0] > _evidence(f):
            j = heapq.heappop(waiting)[1]
            if j not in placed:
                moved.append(j)
        for j in sorted(moved):
            out.append(order[j][0])
            placed.add(j)
        out.append(f)
        placed.add(i)
    return out


def _evidence(f: Fused) -> float:
    """How similar or how strongly matching a passage is, on the absolute 0-1 scales: the stronger
    of its cosine and its keyword coverage (a hybrid candidate found by one list only is not
    weaker for the 0 its reported mean gets from the other)."""
    return max(f.score, f.vector_score or 0.0, f.keyword_score or 0.0)


def _min_max(candidates: Sequence[Candidate]) -> dict[str, float]:
    if not candidates:
        return {}
    values = [c.rank_strength for c in candidates]
    low, high = min(values), max(values)
    return {c.chunk_id: (c.rank_strength - low) / (high - low) if high > low else 1.0 for c in candidates}


def _by_best(candidates: Sequence[Candidate]) -> dict[str, float]:
    best = max((c.rank_strength for c in candidates), default=0.0)
    return {c.chunk_id: c.rank_strength / best if best > 0.0 else 1.0 for c in candidates}


def single(candidates: Sequence[Candidate], from_vector: bool) -> list[Fused]:
    """One list only (vector or keyword mode): score is that list's score; equal strengths go
    to the better body match. The rank value is on the 0-1 scale of a fused rank value, so
    `diversify` treats every mode alike: cosines min-max normalised over the list (unrelated texts
    still have a cosine well above 0), BM25 divided by the best (0 means no query term, so a short
    list of three matches does not send its third to 0)."""
    ordered = sorted(candidates, key=lambda c: (c.rank_strength, c.body or 0.0), reverse=True)
    norm = _min_max(ordered) if from_vector else _by_best(ordered)
    return [
        Fused(c.chunk_id, c.score, c.score if from_vector else None, None if from_vector else c.score,
              norm[c.chunk_id], c.body or 0.0)
        for c in ordered
    ]
