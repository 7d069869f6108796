"""Fusion of the vector and keyword lists (lucidrag/retrieval/fusion.py), checked with values worked
out by hand: the scores each hit reports (shown in the console's "why this rank"), list weights,
normalisation edge cases, and one passage per file first. Written against mutation survivors."""

from __future__ import annotations

import pytest

import lucidrag.retrieval.fusion as fusion
from lucidrag.retrieval.fusion import Candidate, by_coverage, diversify, fuse, single


@pytest.fixture
def plain_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fusion, "CONFIDENCE_WEIGHTING", False)


def by_id(fused):
    return {f.chunk_id: f for f in fused}


def test_each_hit_reports_its_own_vector_and_keyword_score(plain_weights):
    vector = [Candidate("a", 0.9), Candidate("b", 0.5)]
    keyword = [Candidate("b", 0.8), Candidate("c", 0.4)]
    hits = by_id(fuse(vector, keyword, vector_weight=0.7))
    assert (hits["a"].vector_score, hits["a"].keyword_score) == (0.9, None)
    assert (hits["b"].vector_score, hits["b"].keyword_score) == (0.5, 0.8)
    assert (hits["c"].vector_score, hits["c"].keyword_score) == (None, 0.4)
    assert hits["a"].score == pytest.approx(0.7 * 0.9)
    assert hits["b"].score == pytest.approx(0.7 * 0.5 + 0.3 * 0.8)
    assert hits["c"].score == pytest.approx(0.3 * 0.4)
    # rank values: min-max within each list (a: 1, b: 0 | b: 1, c: 0)
    assert hits["a"].rank_value == pytest.approx(0.7)
    assert hits["b"].rank_value == pytest.approx(0.3)
    assert hits["c"].rank_value == pytest.approx(0.0)


def test_ties_go_to_the_better_body_match(plain_weights):
    keyword = [Candidate("x", 0.5, body=0.2), Candidate("y", 0.5, body=0.9)]
    fused = fuse([], keyword, vector_weight=0.5)
    assert [f.chunk_id for f in fused] == ["y", "x"]
    assert by_id(fused)["x"].body == 0.2
    assert by_id(fuse([Candidate("v", 0.5)], [], 0.5))["v"].body == 0.0, "no keyword match: no body match"


def test_a_list_whose_best_stands_out_weighs_more():
    # vector: one clear winner; keyword: every candidate about as good
    vector = [Candidate(f"v{i}", s) for i, s in enumerate([0.9, 0.1, 0.1, 0.1])]
    keyword = [Candidate(f"k{i}", s) for i, s in enumerate([0.50, 0.49, 0.49, 0.40])]
    hits = by_id(fuse(vector, keyword, vector_weight=0.5))
    cv = 1 - (1 + 0 + 0 + 0) / 4
    ck = 1 - (1 + 0.9 + 0.9 + 0) / 4
    weight = 0.5 * cv / (0.5 * cv + 0.5 * ck)
    assert hits["v0"].rank_value == pytest.approx(weight)
    assert hits["k0"].rank_value == pytest.approx(1 - weight)
    assert hits["v0"].score == pytest.approx(weight * 0.9)


def test_a_keyword_list_that_stands_out_never_outweighs_the_vector_list():
    # "What is hepatitis and how is it transmitted?": the vector list holds many passages on
    # hepatitis at near-equal cosines; in the keyword list one off-topic passage holds both rare
    # words, a plateau of passages holds "transmitted" only, and the hepatitis passages hold the
    # more common "hepatitis" only.
    on_topic = [Candidate(f"hepatitis{i}", 0.66 - 0.005 * i) for i in range(10)]
    vector = on_topic + [Candidate(f"other{i}", 0.40) for i in range(10)]
    keyword = ([Candidate("safe-sex", 1.0)] + [Candidate(f"transmitted{i}", 0.55) for i in range(10)]
               + [Candidate(f"hepatitis{i}", 0.45) for i in range(10)])
    fused = fuse(vector, keyword, vector_weight=0.5)
    hits = by_id(fused)
    assert hits["hepatitis0"].rank_value == pytest.approx(0.5), "the vector list keeps its half"
    assert {f.chunk_id for f in fused[:3]} == {"safe-sex", "hepatitis0", "hepatitis1"}
    assert all(hits[f"hepatitis{i}"].rank_value > hits["transmitted0"].rank_value for i in range(5))


def test_confidence_of_lists_of_one_and_many():
    assert fusion._confidence([Candidate("a", 0.3)], {"a": 1.0}) == 0.5
    many = [Candidate(str(i), 0.0) for i in range(12)]
    norm = {str(i): (1.0 if i < 2 else 0.0) for i in range(12)}
    assert fusion._confidence(many, norm) == pytest.approx(1 - 2 / 10), "the best 10 count"
    assert fusion._confidence(many[:2], {"0": 1.0, "1": 0.8}) == pytest.approx(0.1)


def test_only_a_list_with_candidates_changes_the_weights():
    vector = [Candidate("a", 0.9), Candidate("b", 0.2)]
    assert by_id(fuse(vector, [], vector_weight=0.6))["a"].rank_value == pytest.approx(0.6)
    assert by_id(fuse([], vector, vector_weight=0.6))["a"].rank_value == pytest.approx(0.4)


def test_keyword_candidates_rank_by_coverage_for_the_fusion():
    keyword = [Candidate("bm25-best", 0.3, strength=12.0), Candidate("covers-more", 0.9, strength=4.0)]
    ranked = by_coverage(keyword)
    assert [c.chunk_id for c in ranked] == ["covers-more", "bm25-best"]
    assert [c.rank_strength for c in ranked] == [0.9, 0.3]


def test_single_list_rank_values():
    vector = single([Candidate("a", 0.8), Candidate("b", 0.6), Candidate("c", 0.7)], from_vector=True)
    assert [(f.chunk_id, f.rank_value) for f in vector] == [("a", 1.0), ("c", pytest.approx(0.5)), ("b", 0.0)]
    keyword = single([Candidate("a", 0.5, strength=2.0), Candidate("b", 1.0, strength=8.0)], from_vector=False)
    assert [(f.chunk_id, f.rank_value, f.keyword_score, f.vector_score) for f in keyword] == [
        ("b", 1.0, 1.0, None), ("a", 0.25, 0.5, None)]
    assert [(f.vector_score, f.keyword_score, f.body) for f in vector] == [(0.8, None, 0.0), (0.7, None, 0.0),
                                                                          (0.6, None, 0.0)]
    assert [f.body for f in single([Candidate("k", 0.5, body=0.25)], from_vector=False)] == [0.25]
    assert [f.rank_value for f in single([Candidate("z", 0.0, strength=0.0)], from_vector=False)] == [1.0]
    low = single([Candidate("a", 0.8), Candidate("b", 0.4)], from_vector=False)
    assert [f.rank_value for f in low] == [1.0, 0.5], "divided by the best, whatever its size"
    assert single([], from_vector=False) == [] and single([], from_vector=True) == []
    assert [f.rank_value for f in single([Candidate("p", 0.4), Candidate("q", 0.4)], from_vector=True)] == [1.0, 1.0]


def test_a_files_second_passage_follows_other_files_best_unless_far_better():
    ranked = fuse([Candidate("f1-a", 1.0), Candidate("f1-b", 0.8), Candidate("f2-a", 0.7), Candidate("x", 0.0)],
                  [], vector_weight=1.0)
    files = {"f1-a": "f1", "f1-b": "f1", "f2-a": "f2"}  # "x" has no known file: its own
    unknown = fuse([Candidate("u1", 1.0), Candidate("u2", 0.95), Candidate("k", 0.9), Candidate("z", 0.0)], [],
                   vector_weight=1.0)
    assert [f.chunk_id for f in diversify(unknown, {"k": "f", "z": "f"})] == ["u1", "u2", "k", "z"], \
        "chunks whose file is unknown are not taken for passages of one file"
    order = [f.chunk_id for f in diversify(ranked, files)]
    assert order == ["f1-a", "f2-a", "f1-b", "x"]
    # f1-b: 0.8 - 0.5 = 0.3 < f2-a: 0.7; "x" (rank 0) is not penalised as a second passage of anything
    # b1 (cosine 0.6) is not clearly weaker than a3 (0.98): diversity may put it first
    spread = fuse([Candidate("a1", 1.0), Candidate("a2", 0.99), Candidate("a3", 0.98), Candidate("b1", 0.6)],
                  [], vector_weight=1.0)
    order = [f.chunk_id for f in diversify(spread, {"a1": "a", "a2": "a", "a3": "a", "b1": "b"})]
    assert order == ["a1", "a2", "b1", "a3"], "the n-th passage is n x the margin lower"
    # ... but a passage with no evidence never rises above a file's strong passages
    weak = fuse([Candidate("a1", 1.0), Candidate("a2", 0.99), Candidate("a3", 0.98), Candidate("b1", 0.0)],
                [], vector_weight=1.0)
    order = [f.chunk_id for f in diversify(weak, {"a1": "a", "a2": "a", "a3": "a", "b1": "b"})]
    assert order == ["a1", "a2", "a3", "b1"]


def test_equal_rank_values_keep_their_order_after_diversifying():
    ranked = fuse([Candidate("p", 0.5), Candidate("q", 0.5), Candidate("r", 0.5)], [], vector_weight=1.0)
    assert [f.chunk_id for f in diversify(ranked, {})] == [f.chunk_id for f in ranked]
