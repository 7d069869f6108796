"""What the bot is told -- relevant passages first (diversity breaks near-ties only),
small structured files whole, each passage's heading path said once, files titled right."""

from __future__ import annotations

import json

import pytest
from langbot_plugin.api.entities.builtin.rag.models import ParseResult, TextSection

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
    # question. One passage per file first would promote the note's best passage (rank value ~0) to
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
    # A 79-byte backup.json cut into key-level pieces would put, at top_k 5, four unrelated
    # files with score 0 before its retention piece.
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


def what_local_agent_tells(response) -> str:
    """LangBot's LocalAgent gives the model `[n] text` of each result: no metadata reaches it."""
    return "\n".join(f"[{n}] {entry.content[0].text}" for n, entry in enumerate(response.results, 1))


ONBOARDING = """# New staff onboarding

## Holidays

Every employee has 25 days of paid holiday a year. Book them in the HR portal before the 1st of the month.

## Equipment

A laptop and a badge are handed out on the first day by the front desk.
"""
ROTA = b"day,shift,desk\nMonday,early,front desk\nTuesday,late,front desk\n"


def rendered_blocks(markdown: str) -> list[str]:
    """The blocks LangBot's chat shows for `markdown` (react-markdown + remark-gfm there; CommonMark
    with GFM tables here): each paragraph's text, and "<table>" for a table."""
    from markdown_it import MarkdownIt

    blocks, inline = [], False
    for token in MarkdownIt("commonmark").enable("table").parse(markdown):
        if token.type == "table_open":
            blocks.append("<table>")
        elif token.type == "paragraph_open":
            inline = True
        elif token.type == "inline" and inline:
            blocks.append(" ".join(token.content.split()))  # a soft line break shows as a space
            inline = False
    return blocks


def load(path: str):  # noqa: ANN201 - the module at `path` (the preview runner's folder is no package)
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(Path(path).stem, Path(__file__).parent.parent / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def what_the_debug_chat_shows(response, question: str) -> str:
    """The answer scripts/dev-host.sh's "Knowledge base preview" runner and "retrieval-preview"
    model put in LangBot's debug chat: the runner's prompt with the passages, verbatim."""
    runner = load("tests/e2e/fixture_runner/components/runner/kb_preview.py")
    model = load("scripts/offline_llm.py")
    prompt = runner.build_system_prompt([runner.passage_text(entry.model_dump()) for entry in response.results], [])
    return model.preview_answer([{"role": "system", "content": prompt}, {"role": "user", "content": question}])


async def test_in_langbots_markdown_chat_each_source_line_stays_a_line_of_its_own(harness: Harness):
    # A single line break after the source line renders as a space: "[1] Source: New staff
    # onboarding › Holidays Every employee…" (and a table under it as text).
    await harness.ingest(KB, "onboarding.md", ONBOARDING.encode(), document_id="onboarding")
    await harness.ingest(KB, "rota.csv", ROTA, document_id="rota")
    question = "Which holiday days does every employee have, and who is at the front desk?"
    response = await harness.retrieve(KB, question, settings={"top_k": 2})
    assert {entry.metadata["file_id"] for entry in response.results} == {"onboarding", "rota"}
    sources = [f"[{n}] " + entry.content[0].text.split("\n", 1)[0] for n, entry in enumerate(response.results, 1)]
    assert all(" Source: " in source for source in sources), sources
    assert set(sources) <= set(what_local_agent_tells(response).splitlines())  # as plain text: a line each
    blocks = rendered_blocks(what_the_debug_chat_shows(response, question))
    for source, entry in zip(sources, response.results):
        assert source in blocks, (source, blocks)  # rendered: a paragraph of its own
        after = blocks[blocks.index(source) + 1]
        if entry.metadata["file_id"] == "rota":
            assert after == "<table>", blocks  # the passage's table still renders as one
        else:
            assert after.startswith("Every employee has 25 days"), blocks


@pytest.mark.parametrize("creation", [{}, {"chunking": "parent_child"}])
async def test_what_a_runner_prints_says_each_passages_source_and_heading_path_once(harness: Harness, creation: dict):
    await harness.ingest(KB, "kettle.md", KETTLE.encode(), settings=creation)
    response = await harness.retrieve(KB, "kettle descaling safety daily use", settings={"top_k": 3},
                                      creation=creation)
    assert len(response.results) == 3
    for entry in response.results:
        text, heading = entry.content[0].text, entry.metadata["heading"]
        assert heading.startswith("Zephyr Kettle ZK-7 Manual › "), heading
        assert text.startswith(f"Source: {heading}\n"), text  # the heading path names the document
        assert text.count(heading) == 1 and text.count("Zephyr Kettle ZK-7 Manual") == 1, text


async def test_without_the_source_line_the_content_starts_with_its_heading_path(harness: Harness):
    await harness.ingest(KB, "kettle.md", KETTLE.encode())
    response = await harness.retrieve(KB, "kettle descaling safety daily use",
                                      settings={"top_k": 3, "source_line": False})
    for entry in response.results:
        # a runner that prints metadata.citation with the content says each part once
        told = f"source: {entry.metadata['citation']}\n{entry.content[0].text}"
        heading = entry.metadata["heading"]
        assert entry.content[0].text.startswith(heading + "\n"), told
        assert told.count(heading) == 1 and told.count("Zephyr Kettle ZK-7 Manual") == 1, told
        assert entry.metadata["citation"] == "MARKDOWN"


def parsed(*sections: tuple[str, int, int, str]) -> ParseResult:
    """What a Parser plugin hands over: (heading, level, page, text) per section."""
    return ParseResult(text="", sections=[TextSection(content=text, heading=heading, level=level, page=page)
                                          for heading, level, page, text in sections])


@pytest.mark.parametrize("sections, question, source", [
    ((("Pump maintenance guide", 1, 1, "This guide covers the pumps of hall B."),
      ("Seals", 2, 2, "Replace the seal of pump P-7 every 4000 operating hours.")),
     "How often is the seal of pump P-7 replaced?", "Source: Pump maintenance guide › Seals · p. 2"),
    ((("茶叶手册", 1, 1, "本手册介绍常见的茶叶。"),
      ("铁观音", 2, 3, "铁观音产自福建安溪，属于乌龙茶，这种茶香气浓郁。")),
     "铁观音产自哪里？", "来源：茶叶手册 › 铁观音 · 第 3 页"),
    ((("茶葉手冊", 1, 1, "本手冊介紹常見的茶葉。"),
      ("鐵觀音", 2, 3, "鐵觀音產自福建安溪，屬於烏龍茶，這種茶香氣濃郁。")),
     "鐵觀音產自哪裡？", "來源：茶葉手冊 › 鐵觀音 · 第 3 頁"),
], ids=["en", "zh-Hans", "zh-Hant"])
async def test_the_model_is_told_each_passages_document_heading_and_page_in_its_language(
        harness: Harness, sections, question: str, source: str):
    await harness.ingest(KB, "guide.pdf", b"%PDF-1.4", parsed=parsed(*sections))
    response = await harness.retrieve(KB, question, settings={"top_k": 1})
    told = what_local_agent_tells(response)
    assert told.startswith(f"[1] {source}\n\n{sections[1][3]}"), told
    name = sections[0][0]
    assert told.count(name) == 1 and response.results[0].metadata["document_name"] == name, told


async def test_a_text_file_whose_short_first_line_is_its_title_is_named_by_it(harness: Harness):
    await harness.ingest(KB, "notes.txt", b"Tea house opening hours\n\nThe tea house opens at seven.")
    response = await harness.retrieve(KB, "When does the tea house open?")
    entry = response.results[0]
    assert entry.metadata["document_name"] == "Tea house opening hours"  # was "TEXT file, <date>"
    assert entry.metadata["citation"] == "TEXT"
    assert entry.content[0].text == "Source: Tea house opening hours\n\nThe tea house opens at seven."


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
