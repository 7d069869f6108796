"""Smoke test of bench/bench_retrieval.py's core on a 20-document synthetic set with the hash
embedder, so CI covers the benchmark's code path without the benchmark venv (no numpy, no models)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

from tests.fakes import hash_embed

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "bench_retrieval.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_retrieval", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_retrieval"] = module
    spec.loader.exec_module(module)
    return module


def _embed(texts):
    return [hash_embed(t) for t in texts]


def test_metrics_hand_checked():
    br = _load()
    ndcg, recall, mrr = br.metrics(["a", "b", "c"], {"b": 1})
    assert abs(ndcg - 1 / 1.5849625) < 1e-6  # log2(3)
    assert recall == 1.0 and mrr == 0.5
    assert br.metrics(["x"] * 0, {"b": 1}) == (0.0, 0.0, 0.0)
    ndcg, recall, mrr = br.metrics(["a", "b", "c", "d", "e", "f"], {"a": 1, "f": 1})
    assert recall == 0.5 and mrr == 1.0


def test_core_runs_every_configuration_on_a_tiny_set():
    br = _load()
    corpus = {f"d{i}": (f"Part {i}", f"Widget PX-{100 + i} is a bracket number {i} for line {i % 3}. " * 4)
              for i in range(20)}
    queries = {f"q{i}": f"bracket PX-{100 + i}" for i in range(20)}
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(20)}
    recorded = []
    results, bench = asyncio.run(br.evaluate(corpus, queries, qrels, _embed, _embed,
                                             prewarm=recorded.extend))
    assert [r.config.name for r in results] == [c.name for c in br.CONFIGS]
    assert recorded and len(recorded) == len(set(recorded))  # the dry run saw the texts to embed
    assert set(bench.chunks) == {"naive", "lucid", "doc"} and all(n >= 20 for n in bench.chunks.values())
    by = {r.config.name: r for r in results}
    assert by["keyword"].ndcg10 > 0.9  # the code names the doc exactly
    for r in results:
        assert 0.0 <= r.ndcg10 <= 1.0 and 0.0 <= r.recall5 <= 1.0 and 0.0 <= r.mrr10 <= 1.0
        assert r.engine_ms >= 0.0 and r.n_queries == 20
    # BM25 is ours; the relevance cut asks the vector search too (relevance_cut off: no host call)
    assert by["keyword"].calls_breakdown == {"invoke_embedding": 1.0, "vector_search": 1.0}
    assert by["vector"].calls_breakdown.get("vector_search") == 1.0
    assert by["hybrid"].calls_breakdown == {"invoke_embedding": 1.0, "vector_search": 1.0}
    table = br.markdown_table(results)
    assert table.count("\n") == len(results) + 1 and "nDCG@10" in table


def test_subsample_keeps_judged_docs():
    br = _load()

    class DS:
        corpus = {f"d{i}": ("", f"text {i}") for i in range(50)}
        queries = {f"q{i}": f"q {i}" for i in range(10)}
        qrels = {f"q{i}": {f"d{i * 5}": 1} for i in range(10)}

    corpus, queries, qrels = br.subsample(DS, 4, 12, seed=1)
    assert len(queries) == 4 and len(corpus) == 12
    assert all(d in corpus for q in queries for d in qrels[q])


def test_reciprocal_rank_fusion_hand_checked():
    br = _load()
    # a: 1/61 + 1/62, c: 1/63 + 1/61, b: 1/62 (k = 60)
    assert br.reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]]) == ["a", "c", "b"]
    assert br.reciprocal_rank_fusion([[], ["x"]]) == ["x"]


def test_doc_rrf_and_two_top_ks_on_one_ingest_and_the_bar_per_top_k():
    br = _load()
    corpus = {f"d{i}": (f"Part {i}", f"Widget PX-{100 + i} is a bracket number {i} for line {i % 3}. " * 4)
              for i in range(20)}
    queries = {f"q{i}": f"bracket PX-{100 + i}" for i in range(20)}
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(20)}
    configs = [c for c in br.CONFIGS if c.name in {"vector", "keyword", "hybrid", *br.BASELINES}]
    results, bench = asyncio.run(br.evaluate(corpus, queries, qrels, _embed, _embed, configs, top_ks=(10, 5)))
    assert [(r.config.name, r.top_k) for r in results] == [(c.name, k) for k in (10, 5) for c in configs]
    by = {(r.config.name, r.top_k): r for r in results}
    assert by[("doc-rrf", 10)].ndcg10 > 0.9  # doc-bm25 names the doc exactly; fusion keeps it on top
    assert all(len(ranked) <= 5 for ranked in by[("doc-rrf", 5)].per_query.values())
    # the doc-vector half, and the doc-bm25 half's relevance cut
    assert by[("doc-rrf", 10)].calls_breakdown.get("vector_search") == 2.0
    text = br.comparison(results)
    assert "top_k 10 ndcg10 vs the best baseline" in text and "top_k 5 ndcg10 vs the best baseline" in text
    assert "vector - doc-vector" in text
    table = br.summary_table([("tiny", results)])
    assert table.splitlines()[2].startswith("| tiny |") and "hybrid − best baseline @5" in table


def test_markdown_collections_upload_sections_as_headings():
    br = _load()
    body = br.file_body("Acromegaly", "## What causes it?\n\nToo much growth hormone.", ".md")
    assert body.startswith("# Acromegaly\n\n## What causes it?")
    assert br.file_body("T", "text", ".txt") == "T\n\ntext"
    corpus = {"p1": ("Acromegaly", "## What causes it?\n\nToo much growth hormone.\n\n## Treatment\n\nSurgery.")}
    recorded = []
    asyncio.run(br.evaluate(corpus, {"q": "growth hormone"}, {"q": {"p1": 1}}, _embed, _embed,
                            [c for c in br.CONFIGS if c.name == "vector"], prewarm=recorded.extend, file_ext=".md"))
    assert any(t.startswith("Acromegaly › What causes it?") for t in recorded), recorded
