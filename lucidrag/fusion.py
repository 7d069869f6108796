"""Combining vector and keyword candidate lists into one ranking (pure functions).

Ranking uses weighted reciprocal-rank fusion: rank-based, so it needs no calibration between
cosine similarities and BM25 scores. The reported `score` of a fused hit is the weighted mean of
its two 0–1 scores (cosine similarity; keyword match strength), using 0 for a list it is missing
from, so a threshold means "this similar, or this strongly matching", in every mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

RRF_K = 60


@dataclass(frozen=True)
class Candidate:
    chunk_id: str
    score: float  # 0-1, higher is better


@dataclass(frozen=True)
class Fused:
    chunk_id: str
    score: float
    vector_score: float | None
    keyword_score: float | None
    rank_value: float


def fuse(vector: Sequence[Candidate], keyword: Sequence[Candidate], vector_weight: float,
         k: int = RRF_K) -> list[Fused]:
    """Weighted RRF of two best-first lists. Ties keep the vector list's order."""
    keyword_weight = 1.0 - vector_weight
    vector_rank = {c.chunk_id: (r, c.score) for r, c in enumerate(vector)}
    keyword_rank = {c.chunk_id: (r, c.score) for r, c in enumerate(keyword)}
    order = list(dict.fromkeys([c.chunk_id for c in vector] + [c.chunk_id for c in keyword]))
    fused: list[Fused] = []
    for chunk_id in order:
        v = vector_rank.get(chunk_id)
        kw = keyword_rank.get(chunk_id)
        rank_value = (vector_weight / (k + v[0] + 1) if v else 0.0) + (
            keyword_weight / (k + kw[0] + 1) if kw else 0.0
        )
        v_score = v[1] if v else None
        k_score = kw[1] if kw else None
        score = vector_weight * (v_score or 0.0) + keyword_weight * (k_score or 0.0)
        fused.append(Fused(chunk_id, score, v_score, k_score, rank_value))
    fused.sort(key=lambda f: f.rank_value, reverse=True)
    return fused


def single(candidates: Sequence[Candidate], from_vector: bool) -> list[Fused]:
    """One list only (vector or keyword mode): score is that list's score."""
    return [
        Fused(c.chunk_id, c.score, c.score if from_vector else None, None if from_vector else c.score,
              float(len(candidates) - i))
        for i, c in enumerate(candidates)
    ]
