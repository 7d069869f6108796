"""Weighted reciprocal-rank fusion, the baseline score fusion is measured against, kept so that
bench/bench_retrieval.py's `rrf*` variants can measure it against the default. Not shipped."""

from __future__ import annotations

from collections.abc import Sequence

from lucidrag.retrieval.fusion import Candidate, Fused

RRF_K = 60


def fuse_rrf(vector: Sequence[Candidate], keyword: Sequence[Candidate], vector_weight: float,
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
