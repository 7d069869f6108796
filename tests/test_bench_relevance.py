"""Smoke test of bench/bench_relevance.py's core on a synthetic collection with the hash embedder,
so CI covers the benchmark's code path without the benchmark venv (no models)."""

from __future__ import annotations

import asyncio
import math

from bench.bench_relevance import Collection, Recorder, cost, highest_bars, measure, read_dumps, replay, table
from lucidrag.retrieval import relevance
from tests.fakes import hash_embed


def _embed(texts: list[str]) -> list[list[float]]:
    return [hash_embed(t) for t in texts]


def _collection() -> Collection:
    corpus = {f"d{i}": (f"Bracket PX-{100 + i}", f"Bracket PX-{100 + i} holds shelf number {i} on rail {i % 3}. "
                        f"It is rated for {10 + i} kilograms and made of steel grade S{200 + i}.")
              for i in range(30)}
    queries = {f"q{i}": f"How much load does bracket PX-{100 + i} carry?" for i in range(10)}
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(10)}
    foreign = {"rivers": {f"r{i}": question for i, question in enumerate((
        "Which river flows through the old town of Prague?", "When did the Danube last freeze over completely?",
        "Why do salmon swim upstream to spawn?", "Where does the Amazon meet the Atlantic ocean?"))}}
    return Collection("hash", "brackets", corpus, queries, qrels, foreign)


def test_own_questions_keep_their_answers_and_unrelated_ones_get_nothing():
    rows = asyncio.run(measure(_collection(), _embed, _embed, ("vector", "keyword", "hybrid"), rerank=True))
    assert [r.mode for r in rows] == ["vector", "keyword", "hybrid", "hybrid+rerank"]
    for row in rows:
        assert row.real_queries == 10 and row.real_emptied == 0
        assert row.real_on_ndcg == row.real_off_ndcg > 0.5  # the hash embedder ranks codes roughly
        assert row.foreign == {"rivers": (4, 4)}  # one verdict in every mode
    text = table(rows)
    assert text.count("\n") == len(rows) + 1 and text.count("rivers 100 %") == len(rows)


def test_a_replayed_dump_gives_the_rows_the_benchmark_measures_and_the_highest_bars_within_a_cap(tmp_path, monkeypatch):
    modes = ("vector", "keyword", "hybrid")
    measured = asyncio.run(measure(_collection(), _embed, _embed, modes, rerank=True))
    monkeypatch.setattr(relevance, "gather", relevance.gather)  # Recorder.install replaces both
    monkeypatch.setattr(relevance, "judge", relevance.judge)
    recorder = Recorder()
    recorder.install()
    with open(tmp_path / "dump.jsonl", "w", encoding="utf-8") as dump:
        asyncio.run(measure(_collection(), _embed, _embed, modes, rerank=True, recorder=recorder, dump=dump))
    monkeypatch.undo()
    groups = read_dumps([str(tmp_path / "dump.jsonl")])
    assert table(replay(groups, relevance.bar(False, True), relevance.bar(True, True))) == table(measured)
    assert all("anchor" in r for records in groups.values() for r in records)  # (None: too few files for one)
    without = read_dumps([str(tmp_path / "dump.jsonl")], anchors=False)  # --without-anchor: the cut before it
    assert not any("anchor" in r for records in without.values() for r in records)

    assert all(row.foreign == {"rivers": (0, 4)} for row in replay(groups, -math.inf, -math.inf))  # no bar: nothing cut
    answer_bar, keyword_mode_bar = highest_bars(groups, cap=0.005)
    assert max(map(cost, replay(groups, answer_bar, keyword_mode_bar))) <= 0.005
    costs = {r.mode: cost(r) for r in replay(groups, answer_bar + 0.01, keyword_mode_bar)}
    assert costs["keyword"] <= 0.005 < max(costs.values())  # each bar judges its own modes
    costs = {r.mode: cost(r) for r in replay(groups, answer_bar, keyword_mode_bar + 0.01)}
    assert costs["keyword"] > 0.005 >= max(c for mode, c in costs.items() if mode != "keyword")
