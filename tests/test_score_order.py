"""Results come sorted by the score they report, best first, in every mode: a passage the ranking
puts below another (one passage per file first, or the fusion's normalised ranking) reports at
most that passage's score, while its own evidence stays in its metadata."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Harness

KB = "kb-order"
QUESTION = "How do I descale the kettle with citric acid?"

# The manual has two passages that both answer; the coffee note's passage is weaker than the
# manual's second one, yet the one-passage-per-file rule shows it before that second passage.
MANUAL = """# Kettle manual

## Descaling

Descale the kettle with citric acid every month; boil, let it stand thirty minutes, rinse twice.

## Descaling again

Descaling the kettle: citric acid, boil, stand thirty minutes, rinse the kettle twice each month.
"""
NOTES = {
    "kettle-note.txt": "Kettle note\n\nThe office kettle needs descaling when white flakes float in the water.",
    "coffee-note.txt": "Coffee note\n\nThe coffee machine is descaled with citric acid by the facilities team.",
    "tea-note.txt": "Tea note\n\nGreen tea should stand three minutes; black tea four minutes.",
    "mug-note.txt": "Rinse note\n\nRinse the mugs twice before putting them back on the shelf.",
}


async def a_manual_and_notes(harness: Harness, creation: dict[str, Any] | None = None) -> None:
    await harness.ingest(KB, "manual.md", MANUAL.encode(), settings=creation, document_id="manual")
    for name, text in NOTES.items():
        await harness.ingest(KB, name, text.encode(), settings=creation, document_id=name)


def failing_rerank(query: str, documents: list[str]) -> list[float]:
    raise RuntimeError("rerank provider down")


@pytest.mark.parametrize("settings, creation, rerank", [
    ({"search_mode": "vector"}, None, None),
    ({"search_mode": "keyword"}, None, None),
    ({"search_mode": "hybrid"}, None, None),
    ({"search_mode": "hybrid", "context_window": 1}, None, None),
    ({"search_mode": "hybrid"}, {"chunking": "parent_child"}, None),
    ({"search_mode": "hybrid", "rerank_model_uuid": "rr"}, None, failing_rerank),  # the fused order is kept
    ({"search_mode": "hybrid", "rerank_model_uuid": "rr"}, None,
     lambda query, documents: [len(set(query.lower().split()) & set(d.lower().split())) / 9 for d in documents]),
], ids=["vector", "keyword", "hybrid", "hybrid-window", "parent-child", "rerank-failed", "rerank"])
async def test_results_are_sorted_by_the_score_they_report(harness: Harness, host, settings, creation, rerank):
    host.rerank_fn = rerank
    await a_manual_and_notes(harness, creation)
    response = await harness.retrieve(KB, QUESTION, settings={"top_k": 5, **settings}, creation=creation)
    scores = [entry.score for entry in response.results]
    assert len(scores) >= 3 and scores == sorted(scores, reverse=True), scores
    assert all(entry.distance == pytest.approx(1 - entry.score) for entry in response.results)
    # a passage ranked below a weaker one keeps its own evidence in its metadata
    for entry in response.results:
        own = entry.metadata["fused_score"]
        assert own >= entry.score
        parts = [entry.metadata.get("vector_score"), entry.metadata.get("keyword_score")]
        assert any(p is not None for p in parts) or settings.get("rerank_model_uuid"), entry.metadata


@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
async def test_a_files_second_passage_shown_after_another_files_weaker_one_reports_that_score(
        harness: Harness, mode: str):
    await a_manual_and_notes(harness)
    response = await harness.retrieve(KB, QUESTION, settings={"search_mode": mode, "top_k": 5})
    files = [entry.metadata["file_id"] for entry in response.results]
    second = files.index("manual", files.index("manual") + 1)
    demoted, above = response.results[second], response.results[second - 1]
    assert above.metadata["file_id"] != "manual"
    assert demoted.metadata["fused_score"] >= above.metadata["fused_score"]  # its own score is no lower
    assert demoted.score == above.score  # but it reports no more than the passage shown above it


async def test_a_threshold_keeps_the_passages_whose_own_score_meets_it_and_each_reports_at_least_it(
        harness: Harness):
    await a_manual_and_notes(harness)
    everything = await harness.retrieve(KB, QUESTION, settings={"search_mode": "vector", "top_k": 10})
    own = {entry.id: entry.metadata["fused_score"] for entry in everything.results}
    third, fourth = sorted(own.values(), reverse=True)[2:4]
    threshold = (third + fourth) / 2  # keeps the three best own scores
    response = await harness.retrieve(KB, QUESTION, settings={"search_mode": "vector", "top_k": 10,
                                                              "score_threshold": threshold})
    assert [entry.id for entry in response.results] == [i for i in own if own[i] >= threshold]  # same order
    assert len(response.results) == 3 and all(entry.score >= threshold for entry in response.results)
