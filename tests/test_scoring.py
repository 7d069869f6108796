"""The vector score users threshold (lucidrag/vectors/scoring.py): a cosine clipped to 0–1 whatever
the backend reports, the metric measured from (distance, cosine) pairs, and the metric guessed from
one result list while none is measured (a KB whose stored metric was lost).

Written against the survivors of a mutation run of scoring.py (docs/TESTING.md).
"""

from __future__ import annotations

import math

import pytest

from lucidrag.vectors.scoring import Metric, calibrate, clip01, cosine, guess_metric


@pytest.mark.parametrize(("value", "clipped"), [
    (-0.25, 0.0), (math.nan, 0.0), (0.0, 0.0), (0.4, 0.4), (1.0, 1.0), (1.5, 1.0), (2.5, 1.0),
])
def test_a_score_is_clipped_to_zero_one(value: float, clipped: float):
    assert clip01(value) == clipped


def test_cosine_of_vectors_that_are_not_unit_length():
    assert cosine([3.0, 4.0], [6.0, 8.0]) == pytest.approx(1.0)
    assert cosine([1.0, 2.0], [3.0, 4.0]) == pytest.approx(11 / math.sqrt(5 * 25))
    assert cosine([2.0, 0.0], [0.0, 5.0]) == 0.0
    assert cosine([1.0, -1.0], [-2.0, 2.0]) == pytest.approx(-1.0)
    assert cosine([0.0, 0.0], [1.0, 2.0]) == 0.0  # no direction: no similarity


def test_the_metric_is_the_one_that_explains_the_pairs_and_none_when_two_explain_them_alike():
    pairs = [(0.4, 0.8), (1.0, 0.5)]  # squared L2 of unit vectors: cos = 1 - d / 2
    assert calibrate(pairs) is Metric.SQUARED_L2
    assert calibrate([(0.4, 0.6), (0.5, 0.5)]) is Metric.COSINE_DISTANCE
    assert calibrate([(0.6, 0.6), (0.5, 0.5)]) is Metric.SIMILARITY
    assert calibrate([]) is None
    assert calibrate([(0.4, 0.7)]) is None  # squared L2 and cosine distance are both 0.1 off
    # ten pairs each 0.0005 closer to squared L2: a gap of 0.005, within the 0.001-per-pair tolerance
    assert calibrate([(0.4, 0.70025)] * 10) is None
    assert calibrate([(0.4, 0.703)] * 10) is Metric.SQUARED_L2  # 0.006 a pair: 0.06 in all


@pytest.mark.parametrize(("distances", "metric"), [
    ([0.3], Metric.SQUARED_L2),  # one result says nothing of the order
    ([1.5, 1.2], Metric.SQUARED_L2),  # above 1: only squared L2 of unit vectors
    ([1.0, 0.5], Metric.SIMILARITY),  # 1 is a cosine, best first and decreasing
    ([0.9, 0.5], Metric.SIMILARITY),
    ([0.9, 0.9, 0.5], Metric.SIMILARITY),  # the first two tie
    ([0.5, 0.5], Metric.SQUARED_L2),  # a list of ties decreases nowhere
    ([0.2, 0.6, 0.9], Metric.SQUARED_L2),
])
def test_the_metric_guessed_from_one_best_first_result_list(distances: list[float], metric: Metric):
    assert guess_metric(distances) is metric
