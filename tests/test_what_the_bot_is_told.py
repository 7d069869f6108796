"""Issue 20: what the bot is told -- relevant passages first (diversity breaks near-ties only),
small structured files whole, each passage's heading path said once, files titled right."""

from __future__ import annotations

import json

import pytest

from lucidrag.retrieval.fusion import Fused, diversify
from tests.conftest import Harness

KB = "kb-told"
HALF = 0.5  # "clearly weaker": under half the rank value of the other passage (or of the best)

KETTLE = """# Zephyr Kettle ZK-7 Manual

## Descaling

Fill the kettle with water and a sachet of citric acid, boil it and let the kettle stand for
thirty minutes during descaling. Rinse the kettle twice before the next boil.

## Daily use

Fill the kettle to the MAX mark and let it stand on its base. A long boil is not needed: the
kettle stops by itself.

## Safety

Never let the kettle stand empty on a hot base. Unplug the kettle before descaling or cleaning it.
"""

TEA_HOUSE = "茶馆笔记\n\n镇上的茶馆每天早上七点开门，茶农把新茶挑到石板街出售，茶馆里坐满了喝茶聊天的人。\n"


async def test_a_kb_with_one_relevant_file_returns_its_passages_before_an_unrelated_note(harness: Harness):
    # The manual's three passages all mention the kettle; the Chinese note shares nothing with the
    # question. One passage per file used to promote the note's best passage (rank value ~0) to
    # second place, above the manual's other sections.
    await harness.ingest(KB, "kettle.md", KETTLE.encode(), document_id="manual")
    await harness.ingest(KB, "teahouse.txt", TEA_HOUSE.encode(), document_id="note")
    for mode in ("hybrid", "vector", "keyword"):
        response = await harness.retrieve(KB, "How long should the kettle stand during descaling?",
                                          settings={"search_mode": mode, "top_k": 3})
        files = [entry.metadata["file_id"] for entry in response.results]
        assert files == ["manual"] * 3, (mode, [entry.metadata["heading"] for entry in response.results])
        assert "thirty minutes" in response.results[0].content[0].text


def test_diversity_never_puts_a_passage_under_half_the_best_before_one_above_it():
    # a: the answer's file, two strong passages and one weaker; b, c: other files' best passages
    values = {"a1": 1.0, "a2": 0.9, "a3": 0.62, "b1": 0.55, "c1": 0.45, "d1": 0.2, "a4": 0.3, "e1": 0.1}
    ranked = [Fused(cid, v, None, None, v) for cid, v in sorted(values.items(), key=lambda p: -p[1])]
    order = [f.chunk_id for f in diversify(ranked, {cid: cid[0] for cid in values})]
    best = max(values.values())
    for i, earlier in enumerate(order):
        for later in order[i + 1:]:
            if values[later] >= HALF * best:
                assert values[earlier] >= HALF * best, order
            # nothing under half a passage's own value goes before it either
            assert values[earlier] >= HALF * values[later], order
    # near-ties are still broken for diversity: b's best comes before a's second passage
    assert order.index("b1") < order.index("a3")


async def test_a_small_json_file_is_one_chunk_and_its_answer_is_found(harness: Harness):
    # A 79-byte backup.json used to be cut into key-level pieces; at top_k 5 four unrelated
    # files with score 0 came before its retention piece.
    backup = json.dumps({"backup": {"schedule": "nightly", "retention_days": 14}, "target": "s3://vault"})
    await harness.ingest(KB, "backup.json", backup.encode(), document_id="backup")
    for i, topic in enumerate(("canteen menu", "parking rules", "holiday calendar", "printer toner")):
        await harness.ingest(KB, f"note-{i}.txt", f"Office note on the {topic}: ask reception.".encode(),
                             document_id=f"note-{i}")
    for mode in ("hybrid", "vector", "keyword"):
        response = await harness.retrieve(KB, "backup retention days", settings={"search_mode": mode, "top_k": 5})
        texts = [entry.content[0].text for entry in response.results]
        assert response.results[0].metadata["file_id"] == "backup", (mode, texts)
        assert "retention_days: 14" in texts[0] and "target: s3://vault" in texts[0], (mode, texts)


@pytest.mark.parametrize("name, data", [
    ("backup.json", json.dumps({"backup": {"schedule": "nightly", "retention_days": 14},
                                "target": "s3://vault", "owner": "ops"}).encode()),
    ("events.jsonl", b'{"event": "start", "at": "09:00"}\n{"event": "stop", "at": "17:00"}\n'),
    ("towns.csv", b"town,mascot\nPellucid Springs,copper heron\nDunmarrow,grey badger\n"),
])
def test_a_structured_file_of_a_few_lines_is_one_chunk(name: str, data: bytes):
    from lucidrag.base.settings import CreationSettings
    from lucidrag.ingestion.chunking import chunk_document
    from lucidrag.ingestion.parsing.registry import parse_bytes

    chunks = chunk_document(parse_bytes(data, name), CreationSettings("model")).chunks
    assert len(chunks) == 1, chunks


@pytest.mark.parametrize("creation, settings", [
    ({}, {}),
    ({"chunking": "parent_child"}, {}),
])
async def test_what_a_runner_prints_says_each_heading_path_once(harness: Harness, creation: dict, settings: dict):
    # A runner prints each entry's `citation` and its content (README); the content starts with
    # the heading path, so the citation must not repeat it, nor the title it starts with.
    await harness.ingest(KB, "kettle.md", KETTLE.encode(), settings=creation)
    response = await harness.retrieve(KB, "kettle descaling safety daily use",
                                      settings={"top_k": 3, **settings}, creation=creation)
    assert len(response.results) == 3
    for entry in response.results:
        told = f"source: {entry.metadata['citation']}\n{entry.content[0].text}"
        heading = entry.metadata["heading"]
        assert heading.startswith("Zephyr Kettle ZK-7 Manual › "), heading
        assert told.count(heading) == 1 and told.count("Zephyr Kettle ZK-7 Manual") == 1, told
        assert entry.content[0].text.startswith(heading + "\n"), told
        assert entry.metadata["citation"] == "MARKDOWN"


async def test_a_text_file_whose_short_first_line_is_its_title_is_named_by_it(harness: Harness):
    await harness.ingest(KB, "notes.txt", b"Tea house opening hours\n\nThe tea house opens at seven.")
    response = await harness.retrieve(KB, "When does the tea house open?")
    entry = response.results[0]
    assert entry.metadata["document_name"] == "Tea house opening hours"  # was "TEXT file, <date>"
    assert entry.metadata["citation"] == "TEXT"
    told = f"{entry.metadata['citation']}\n{entry.content[0].text}"
    assert told.count("Tea house opening hours") == 1, told


def test_of_two_about_equal_passages_the_one_whose_file_holds_more_of_the_answer_comes_first():
    from lucidrag.retrieval.fusion import FILE_SUPPORT

    # a: an abstract whose two halves both match; b: a single passage a little better than a's best
    ranked = [Fused("b1", 0.62, 0.6, 0.64, 0.82), Fused("a1", 0.6, 0.6, 0.6, 0.80),
              Fused("a2", 0.5, 0.5, 0.5, 0.60), Fused("c1", 0.3, 0.3, 0.3, 0.30)]
    file_of = {"a1": "a", "a2": "a", "b1": "b", "c1": "c"}
    assert [f.chunk_id for f in diversify(ranked, file_of, FILE_SUPPORT)][:2] == ["a1", "b1"]
    # without the support the order is the fused one; a clear lead is not overturned
    assert [f.chunk_id for f in diversify(ranked, file_of)][:2] == ["b1", "a1"]
    ranked[0] = Fused("b1", 0.9, 0.9, 0.9, 1.0)
    assert [f.chunk_id for f in diversify(ranked, file_of, FILE_SUPPORT)][:2] == ["b1", "a1"]
