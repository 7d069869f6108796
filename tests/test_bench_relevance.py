"""Smoke test of bench/bench_relevance.py's core on a synthetic collection with the hash embedder,
so CI covers the benchmark's code path without the benchmark venv (no models)."""

from __future__ import annotations

import asyncio

from bench.bench_relevance import Collection, measure, table
from tests.fakes import hash_embed


def _embed(texts: list[str]) -> list[list[float]]:
    return [hash_embed(t) for t in texts]


def test_own_questions_keep_their_answers_and_unrelated_ones_get_nothing():
    corpus = {f"d{i}": (f"Bracket PX-{100 + i}", f"Bracket PX-{100 + i} holds shelf number {i} on rail {i % 3}. "
                        f"It is rated for {10 + i} kilograms and made of steel grade S{200 + i}.")
              for i in range(30)}
    queries = {f"q{i}": f"How much load does bracket PX-{100 + i} carry?" for i in range(10)}
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(10)}
    foreign = {"rivers": {f"r{i}": question for i, question in enumerate((
        "Which river flows through the old town of Prague?", "When did the Danube last freeze over completely?",
        "Why do salmon swim upstream to spawn?", "Where does the Amazon meet the Atlantic ocean?"))}}
    rows = asyncio.run(measure(Collection("hash", "brackets", corpus, queries, qrels, foreign),
                               _embed, _embed, ("vector", "keyword", "hybrid"), rerank=True))
    assert [r.mode for r in rows] == ["vector", "keyword", "hybrid", "hybrid+rerank"]
    for row in rows:
        assert row.real_queries == 10 and row.real_emptied == 0
        assert row.real_on_ndcg == row.real_off_ndcg > 0.5  # the hash embedder ranks codes roughly
        assert row.foreign == {"rivers": (4, 4)}
    text = table(rows)
    assert text.count("\n") == len(rows) + 1 and "rivers 100 %" in text
