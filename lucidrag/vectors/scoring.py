"""Turning each backend's `distance` into one similarity score users can threshold.

LangBot's vector backends report different things in `distance` (see the host adapters):
Chroma — squared L2 (unit vectors: d = 2 − 2·cos); Qdrant — 1 − cosine similarity; pgvector and
SeekDB — cosine distance (1 − cos); Milvus (COSINE metric) — the cosine *similarity* itself,
higher is better. LucidRAG's vector `score` is always the cosine similarity, clipped to 0–1, so one
`score_threshold` means the same on every backend.

Which metric a KB's backend uses is measured once, right after its first upsert (`calibrate`):
search with a vector we just stored and compare the reported distances with cosines we compute
ourselves. Until then `guess_metric` infers it from the shape of the distances.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import Enum


class Metric(str, Enum):
    SQUARED_L2 = "squared_l2"
    COSINE_DISTANCE = "cosine_distance"
    SIMILARITY = "similarity"


def cosine_from_distance(distance: float, metric: Metric) -> float:
    if metric is Metric.SQUARED_L2:
        return 1.0 - distance / 2.0
    if metric is Metric.COSINE_DISTANCE:
        return 1.0 - distance
    return distance


def clip01(value: float) -> float:
    return 0.0 if value < 0.0 or math.isnan(value) else 1.0 if value > 1.0 else value


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def calibrate(observed: Sequence[tuple[float, float]]) -> Metric | None:
    """Pick the metric that best explains (reported distance, true cosine) pairs.

    Returns None when the pairs cannot tell the metrics apart (e.g. only an exact self-match).
    """
    if not observed:
        return None
    errors = {
        metric: sum(abs(cosine_from_distance(d, metric) - c) for d, c in observed)
        for metric in Metric
    }
    best = min(errors, key=lambda m: errors[m])
    ranked = sorted(errors.values())
    if len(ranked) > 1 and ranked[1] - ranked[0] < 1e-3 * len(observed):
        return None
    return best


def guess_metric(distances: Sequence[float]) -> Metric:
    """Infer the metric from one result list (best first) when no calibration is stored."""
    if any(d > 1.0 + 1e-6 for d in distances):
        return Metric.SQUARED_L2  # only squared L2 exceeds 1 for cosine-like scores of unit vectors
    if len(distances) > 1 and distances[0] > distances[-1] + 1e-9:
        return Metric.SIMILARITY  # best-first list that decreases: higher is better
    return Metric.SQUARED_L2
