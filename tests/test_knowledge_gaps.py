"""What the knowledge base could not answer: "nothing found" counts the questions that gave the bot
no passage, and the console lists them (most frequent, then most recent first) per window and in
the export. Pure functions on entries, then the console API on the real components."""

from __future__ import annotations

import csv
import io
import json

from lucidrag.state.querylog import QueryEntry, question_digest
from lucidrag.state.querystats import nothing_found, summary, unanswered, unanswered_csv
from tests.conftest import Harness
from tests.test_console import KB, ConsoleHost, api, host, page  # noqa: F401 - fixtures
from tests.test_query_log import SOLAR_Q, kb_with_two_files

NOW = 1_800_000_000.0


def entry(question: str, at: float, results: int, error: str = "", mode: str = "hybrid") -> QueryEntry:
    return QueryEntry(at, question, question_digest(KB, question), mode, 12.0, 5, results, (), error)


def test_nothing_found_is_an_answered_question_that_gave_the_bot_no_passage():
    assert nothing_found(entry("kettle warranty", NOW, 0))
    assert not nothing_found(entry("solar array", NOW, 3))
    assert not nothing_found(entry("solar array", NOW, 0, error="The vector database search failed"))


def test_unanswered_questions_are_counted_together_most_frequent_then_most_recent_first():
    entries = [
        entry("Kettle warranty?", NOW - 50, 0),
        entry("solar array", NOW - 40, 4),
        entry("espresso descaling", NOW - 30, 0),
        entry("kettle  WARRANTY?", NOW - 20, 0),  # the same question, other case and spacing
        entry("coffee beans origin", NOW - 10, 0),
        entry("espresso descaling", NOW - 5, 2),  # answered once: still listed for the time it was not
        entry("broken", NOW - 1, 0, error="The embedding model failed"),
    ]
    gaps = unanswered(entries)
    assert [(g["question"], g["count"]) for g in gaps] == [
        ("kettle  WARRANTY?", 2), ("coffee beans origin", 1), ("espresso descaling", 1)]
    assert gaps[0]["last_at"] == NOW - 20 and gaps[0]["last_time"].endswith(" UTC")
    assert gaps[0]["hash"] == question_digest(KB, "kettle warranty?")

    window = summary(entries, NOW - 45, known_files=[], names={})  # the first kettle question is older
    assert window["questions"] == 6 and window["nothing_found"] == 3 and window["errors"] == 1
    assert window["nothing_found_rate"] == 0.5
    assert [(g["question"], g["count"]) for g in window["could_not_answer"]] == [
        ("coffee beans origin", 1), ("kettle  WARRANTY?", 1), ("espresso descaling", 1)]
    assert window["could_not_answer_count"] == 3


def test_the_unanswered_list_is_exported_as_csv_one_row_per_question():
    entries = [entry("电水壶的保修期是多久", NOW - 9, 0), entry("kettle, \"warranty\"", NOW - 8, 0),
               entry("电水壶的保修期是多久", NOW - 7, 0, mode="keyword")]
    rows = list(csv.DictReader(io.StringIO(unanswered_csv(unanswered(entries)))))
    assert [(r["question"], r["times_asked"], r["mode"]) for r in rows] == [
        ("电水壶的保修期是多久", "2", "keyword"), ("kettle, \"warranty\"", "1", "hybrid")]
    assert rows[0]["last_asked"].startswith("20") and len(rows[0]["hash"]) == 16


async def test_the_console_lists_what_the_knowledge_base_could_not_answer_and_exports_it(harness: Harness, host,
                                                                                      page):
    await kb_with_two_files(harness, host)
    keyword = {"search_mode": "keyword"}
    for question in ["zygomorphic xylophones", SOLAR_Q, "zygomorphic xylophones", "kettle warranty 电水壶"]:
        await harness.retrieve(KB, question, settings=keyword)
    day = (await api(page, "/analytics", kb_id=KB))["windows"]["day"]
    assert day["nothing_found"] == 3 and day["could_not_answer_count"] == 2
    assert [(g["question"], g["count"]) for g in day["could_not_answer"]] == [
        ("zygomorphic xylophones", 2), ("kettle warranty 电水壶", 1)]

    as_csv = await api(page, "/analytics/export", kb_id=KB, format="csv", list="unanswered")
    assert as_csv["filename"].startswith("lucidrag-unanswered-") and as_csv["filename"].endswith(".csv")
    assert as_csv["count"] == 2 and as_csv["list"] == "unanswered"
    assert [r["question"] for r in csv.DictReader(io.StringIO(as_csv["content"]))] == [
        "zygomorphic xylophones", "kettle warranty 电水壶"]
    as_json = await api(page, "/analytics/export", kb_id=KB, format="json", list="unanswered")
    assert [(g["question"], g["count"]) for g in json.loads(as_json["content"])] == [
        ("zygomorphic xylophones", 2), ("kettle warranty 电水壶", 1)]
    everything = await api(page, "/analytics/export", kb_id=KB, format="csv")
    assert everything["list"] == "questions" and everything["count"] == 4


async def test_in_hash_mode_the_unanswered_list_counts_repeats_without_the_text(harness: Harness, host, page):
    await kb_with_two_files(harness, host)
    for _ in range(2):
        await harness.retrieve(KB, "zygomorphic xylophones", settings={"search_mode": "keyword", "query_log": "hash"})
    [gap] = (await api(page, "/analytics", kb_id=KB))["windows"]["hour"]["could_not_answer"]
    assert gap["question"] == "" and gap["count"] == 2 and gap["hash"] == question_digest(KB, "zygomorphic xylophones")


async def test_the_question_of_issue_40_that_no_file_answers_is_listed_as_a_gap_with_the_relevance_cut():
    """The coffee-grinder office KB of tests/test_relevance_cut.py with default settings: the relevance
    cut gives the kettle question no passage, so the console counts it as nothing found and lists it."""
    from components.pages.console.console import LucidRagConsole
    from tests.test_console import create_kb
    from tests.test_relevance_cut import ANSWERED, FILES, NOTES, UNANSWERED, model_like

    host = ConsoleHost(embed=model_like(0.5))
    harness = Harness(host)
    await create_kb(harness, host, "kb-office", "Office")
    for name, content in {**FILES, **NOTES}.items():
        await harness.ingest("kb-office", name, content.encode(), document_id=name)
    for question in (UNANSWERED, ANSWERED, UNANSWERED):
        await harness.retrieve("kb-office", question)  # default settings: hybrid, relevance_cut auto
    console = LucidRagConsole()
    console.plugin = host  # type: ignore[assignment]
    day = (await api(console, "/analytics", kb_id="kb-office"))["windows"]["day"]
    assert day["questions"] == 3 and day["nothing_found"] == 2
    assert [(g["question"], g["count"]) for g in day["could_not_answer"]] == [(UNANSWERED, 2)]
