"""Hand-checked cases for fusion, score derivation, neighbour merging and parent passages."""

from __future__ import annotations

import pytest

from lucidrag.retrieval.fusion import Candidate, fuse, single
from lucidrag.retrieval.retrieve import citation, merge_texts
from lucidrag.vectors.scoring import (
    Metric,
    calibrate,
    cosine_from_distance,
    guess_metric,
)
from tests.conftest import Harness

KB = "kb-units"


def test_fusion_puts_a_chunk_found_by_both_lists_first():
    vector = [Candidate("a", 0.9), Candidate("b", 0.8), Candidate("c", 0.7)]
    keyword = [Candidate("c", 1.0, strength=12.0), Candidate("d", 0.5, strength=3.0)]
    fused = fuse(vector, keyword, vector_weight=0.5)
    # c: 0.5 * 0 (lowest cosine) + 0.5 * 1 (best BM25) = 0.5 ties a: 0.5 * 1 = 0.5;
    # the tie goes to c, whose absolute score (0.85) beats a's (0.45)
    assert [f.chunk_id for f in fused] == ["c", "a", "b", "d"]
    c = next(f for f in fused if f.chunk_id == "c")
    assert c.score == pytest.approx(0.5 * 0.7 + 0.5 * 1.0)  # reported score uses absolute scores
    d = next(f for f in fused if f.chunk_id == "d")
    assert d.score == pytest.approx(0.5 * 0.5) and d.vector_score is None and d.rank_value == 0.0


def test_rrf_variant_rewards_presence_in_both_lists():
    from bench.lib.rrf import fuse_rrf  # the benchmark's comparison ranking

    vector = [Candidate("a", 0.9), Candidate("b", 0.8), Candidate("c", 0.7)]
    keyword = [Candidate("c", 1.0), Candidate("d", 0.5)]
    assert fuse_rrf(vector, keyword, vector_weight=0.5)[0].chunk_id == "c"


def test_vector_weight_one_reproduces_the_vector_order():
    vector = [Candidate("a", 0.9), Candidate("b", 0.8)]
    keyword = [Candidate("b", 1.0, strength=5.0), Candidate("z", 0.9, strength=4.0)]
    fused = fuse(vector, keyword, vector_weight=1.0)
    assert [f.chunk_id for f in fused][:2] == ["a", "b"]
    assert fused[-1].score == 0.0  # keyword-only hit carries no weight


def test_single_list_scores_are_that_lists_scores():
    assert [f.score for f in single([Candidate("a", 0.7), Candidate("b", 0.2)], from_vector=True)] == [0.7, 0.2]


@pytest.mark.parametrize("metric, distance, cos", [
    (Metric.SQUARED_L2, 0.4, 0.8),          # Chroma: d = 2 - 2cos
    (Metric.COSINE_DISTANCE, 0.2, 0.8),     # pgvector / Qdrant / SeekDB: d = 1 - cos
    (Metric.SIMILARITY, 0.8, 0.8),          # Milvus COSINE: the similarity itself
])
def test_distance_to_cosine_per_backend(metric, distance, cos):
    assert cosine_from_distance(distance, metric) == pytest.approx(cos)


def test_calibration_identifies_each_backend_from_observed_pairs():
    cosines = [1.0, 0.8, 0.55, 0.3]
    assert calibrate([(2 - 2 * c, c) for c in cosines]) is Metric.SQUARED_L2
    assert calibrate([(1 - c, c) for c in cosines]) is Metric.COSINE_DISTANCE
    assert calibrate([(c, c) for c in cosines]) is Metric.SIMILARITY
    assert calibrate([(0.0, 1.0)]) is None  # a self-match alone cannot tell L2 from cosine distance


def test_guess_metric_from_distance_shapes():
    assert guess_metric([0.3, 1.4]) is Metric.SQUARED_L2
    assert guess_metric([0.9, 0.7, 0.5]) is Metric.SIMILARITY


def test_merge_texts_removes_overlap_and_repeated_headings():
    a = "Guide › Setup\nInstall the package. Then configure the server settings."
    b = "Guide › Setup\nconfigure the server settings. Finally restart the service."
    assert merge_texts([a, b]) == ("Guide › Setup\nInstall the package. Then configure the server settings."
                                   " Finally restart the service.")
    assert merge_texts(["one", "two"]) == "one\ntwo"


def test_citation_reads_like_a_source_line_without_what_the_content_says():
    # the content starts with the heading path: the citation names the document only when that
    # path does not start with its name
    assert citation("pdf", 3, "Field report", "Guide › Install") == "Field report · PDF · p. 3"
    assert citation("pdf", 3, "Guide", "Guide › Install") == "PDF · p. 3"
    assert citation("text", None) == "TEXT"


def _numbered(n: int) -> bytes:
    return "\n\n".join(f"Paragraph {i}: the code word for step {i} is W{i:03d}X. " + "Filler text. " * 30
                       for i in range(n)).encode()


async def test_context_window_returns_neighbours_in_order_without_duplicates(harness: Harness):
    await harness.ingest(KB, "steps.txt", _numbered(12), settings={"chunk_size": 450, "chunk_overlap": 0})
    plain = await harness.texts(KB, "W005X", settings={"search_mode": "keyword", "top_k": 1})
    assert "W005X" in plain[0] and "W004X" not in plain[0] and "W006X" not in plain[0]
    wide = await harness.texts(KB, "W005X", settings={"search_mode": "keyword", "top_k": 1, "context_window": 1})
    text = wide[0]
    assert text.index("W004X") < text.index("W005X") < text.index("W006X")
    assert text.count("W005X") == 1


async def test_context_window_does_not_return_the_same_span_twice(harness: Harness):
    await harness.ingest(KB, "steps.txt", _numbered(12), settings={"chunk_size": 450, "chunk_overlap": 0})
    hits = await harness.texts(KB, "W005X W006X", settings={"search_mode": "keyword", "top_k": 3, "context_window": 1})
    joined = "\n".join(hits)
    assert joined.count("W005X") == 1 and joined.count("W006X") == 1


async def test_parent_child_returns_each_parent_section_once(harness: Harness, host):
    text = ("# Refunds\n\nRefunds are issued within 14 days. " + "Receipts are required for every refund. " * 8 +
            "\n\n# Shipping\n\nOrders ship from Rotterdam. " + "Tracking numbers arrive by email. " * 8)
    await harness.ingest(KB, "policy.md", text.encode(),
                         settings={"chunking": "parent_child", "chunk_size": 256, "chunk_overlap": 0})
    assert len(host.vectors_of(KB)) > 2  # small children were indexed
    hits = await harness.texts(KB, "refund receipts 14 days",
                               settings={"search_mode": "keyword", "top_k": 5, "source_line": False})
    refund_hits = [h for h in hits if "Refunds are issued within 14 days" in h]
    assert len(refund_hits) == 1  # several children matched, the parent is returned once
    assert refund_hits[0].startswith("Refunds") and "Receipts are required" in refund_hits[0]


async def test_identical_files_uploaded_twice_do_not_fill_top_k_with_copies(harness: Harness):
    data = b"The loading dock closes at 18:00 on weekdays and at noon on Saturdays."
    await harness.ingest(KB, "dock.txt", data)
    await harness.ingest(KB, "dock-copy.txt", data)
    await harness.ingest(KB, "other.txt", b"The cafeteria serves lunch from 11:30.")
    hits = await harness.texts(KB, "When does the loading dock close?")
    assert sum("loading dock" in h for h in hits) == 1


async def test_rerank_reorders_candidates_and_its_score_is_reported(harness: Harness, host):
    await harness.ingest(KB, "a.txt", b"Apples are red or green.")
    await harness.ingest(KB, "b.txt", b"Bananas are yellow.")
    host.rerank_fn = lambda query, docs: [0.9 if "Bananas" in d else 0.1 for d in docs]
    response = await harness.retrieve(KB, "apples", settings={"rerank_model_uuid": "rr"})
    assert "Bananas" in response.results[0].content[0].text
    assert response.results[0].score == pytest.approx(0.9)
    assert host.calls["invoke_rerank"] == 1


def test_keyword_coverage_is_the_idf_weighted_share_of_query_terms_present():
    from tests.reference_bm25 import BM25Index, coverage

    index = BM25Index()
    index.add("f", [("1", "rare widget alpha"), ("2", "common text"), ("3", "common words")])
    weights = index.term_weights("rare common")
    assert weights["rar"] > weights["common"]  # rarer term weighs more (terms are stemmed)
    assert coverage(weights, "rare widget") == pytest.approx(weights["rar"] / sum(weights.values()))
    assert coverage(weights, "rare common") == pytest.approx(1.0)
    assert coverage(weights, "nothing here") == 0.0


def test_term_weights_after_remove_equal_a_fresh_index():
    from tests.reference_bm25 import BM25Index

    a, b = BM25Index(), BM25Index()
    a.add("x", [("1", "apple pear"), ("2", "apple plum")])
    a.add("y", [("3", "apple fig")])
    a.remove("x")
    b.add("y", [("3", "apple fig")])
    assert a.term_weights("apple pear fig") == pytest.approx(b.term_weights("apple pear fig"))


async def test_keyword_mode_scores_a_full_match_as_one(harness: Harness):
    await harness.ingest(KB, "codes.txt", b"Error code E-4411 means the pump overheated.")
    await harness.ingest(KB, "other.txt", b"The pump manual covers cleaning.")
    response = await harness.retrieve(KB, "E-4411 pump overheated", settings={"search_mode": "keyword"})
    assert response.results[0].score == pytest.approx(1.0)
    assert 0.0 < response.results[-1].score < 1.0
