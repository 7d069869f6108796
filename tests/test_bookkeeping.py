"""Bookkeeping never breaks the business path: the query log and its saving may fail, the question
still gets its passages; the failure is counted (the console shows it) and logged once, not per
question. Driven through the real KnowledgeEngine and Page components on the fake host."""

from __future__ import annotations

import json
import logging
import zlib

import pytest

from lucidrag.base.bookkeeping import BookkeepingFailures, storable
from lucidrag.state import querylog
from lucidrag.state.querylog import QueryEntry, question_digest
from tests.conftest import Harness
from tests.test_console import KB, SOLAR, ConsoleHost, api, create_kb, host, page  # noqa: F401 - fixtures

CUT_EMOJI = "How much does the solar array produce? \ud83d"  # a chat message cut in the middle of 😀


def stored_questions(host: ConsoleHost) -> list[str]:
    blocks = [v for k, v in sorted(host.storage.items()) if f"/kb/{KB}/qlog/" in k]
    return [entry["q"] for block in blocks for entry in json.loads(zlib.decompress(block[2:]))]


@pytest.mark.parametrize("mode", ["hybrid", "vector", "keyword"])
@pytest.mark.parametrize("query_log", ["text", "hash", "off"])
async def test_a_question_cut_mid_emoji_gets_its_passages_in_every_mode(harness: Harness, host, page, mode,
                                                                         query_log):
    await create_kb(harness, host)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    response = await harness.retrieve(KB, CUT_EMOJI, settings={"search_mode": mode, "query_log": query_log})
    assert [e.metadata["file_id"] for e in response.results] == [solar.document_id]
    assert not response.metadata  # no {"error": "UnicodeEncodeError"}
    data = await api(page, "/analytics", kb_id=KB)
    assert data["bookkeeping_errors"]["count"] == 0
    if query_log == "off":
        assert data["questions"] == []
        return
    [row] = data["questions"]
    assert row["results"] == 1 and row["hash"] == question_digest(KB, CUT_EMOJI)
    if query_log == "text":
        assert row["question"] == CUT_EMOJI[:-1] + "\ufffd" and stored_questions(host) == [row["question"]]
    else:
        assert row["question"] == "" and stored_questions(host) == [""]


def test_storable_text_replaces_lone_surrogates_and_joins_pairs():
    assert storable("ok 😀") == "ok 😀"
    assert storable("cut \ud83d") == "cut \ufffd" and storable("\ude00 tail") == "\ufffd tail"
    assert storable("joined \ud83d\ude00") == "joined 😀"  # a pair carried as two code points
    assert storable("a\ud83d" * 3).encode() == "a\ufffd".encode() * 3


async def test_a_query_log_that_fails_on_every_question_is_counted_and_logged_once(
        harness: Harness, host, page, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    await create_kb(harness, host)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)

    def broken(self: QueryEntry) -> bytes:
        raise ValueError("the log's encoder is broken")

    monkeypatch.setattr(QueryEntry, "encode", broken)
    caplog.set_level(logging.WARNING, logger="lucidrag.base.bookkeeping")
    for n in range(5):
        response = await harness.retrieve(KB, f"solar array {n}")
        assert [e.metadata["file_id"] for e in response.results] == [solar.document_id]
        assert not response.metadata
    reports = [r for r in caplog.records if r.name == "lucidrag.base.bookkeeping"]
    assert len(reports) == 1 and "the query log failed" in reports[0].getMessage()
    assert "answered all the same" in reports[0].getMessage()
    failures = (await api(page, "/analytics", kb_id=KB))["bookkeeping_errors"]
    assert failures["count"] == 5 and "the log's encoder is broken" in failures["last"] and failures["last_at"]


async def test_a_query_log_whose_storage_write_raises_still_answers_and_the_console_shows_the_questions(
        harness: Harness, host, page, monkeypatch: pytest.MonkeyPatch):
    await create_kb(harness, host)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)

    async def raising_write(*args: object, **kwargs: object) -> bool:
        raise RuntimeError("storage client bug")

    monkeypatch.setattr(querylog, "put_value", raising_write)
    for n in range(3):
        response = await harness.retrieve(KB, f"solar array {n}")
        assert [e.metadata["file_id"] for e in response.results] == [solar.document_id]
    await harness.ingest(KB, "more.txt", b"Wind turbines on the roof of building D.")  # saves beside the upload
    data = await api(page, "/analytics", kb_id=KB)  # saves before it shows them
    assert "error" not in data
    assert [q["question"] for q in data["questions"]] == [f"solar array {n}" for n in (2, 1, 0)]
    assert data["bookkeeping_errors"]["count"] >= 2 and "storage client bug" in data["bookkeeping_errors"]["last"]


def test_each_kind_of_failure_is_logged_on_its_own_and_the_count_covers_all(caplog: pytest.LogCaptureFixture):
    failures = BookkeepingFailures()
    caplog.set_level(logging.WARNING, logger="lucidrag.base.bookkeeping")
    for _ in range(3):
        with failures.guard("the query log"):
            raise KeyError("x")
        with failures.guard("saving the query logs"):
            raise OSError("y \ud83d")
    assert failures.count == 6 and failures.last == "saving the query logs: OSError: y \ufffd"
    assert [r.getMessage().split(" failed")[0] for r in caplog.records] == ["the query log", "saving the query logs"]


def test_the_console_page_shows_the_query_log_errors_in_both_languages():
    from tests.test_console import ROOT

    html = (ROOT / "components/pages/console/console.html").read_text(encoding="utf-8")
    assert 'data-testid="analytics-errors"' in html and "a.bookkeeping_errors" in html
    for phrase in ("Query log errors since the plugin started: {n} (last: {last})", "提问记录出错 {n} 次"):
        assert phrase in html


async def test_storage_refusing_the_log_is_counted_and_logged_once_and_the_questions_are_kept(
        harness: Harness, host, page, caplog: pytest.LogCaptureFixture):
    await create_kb(harness, host)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    log_writes = []
    host.fail("set_plugin_storage", when=lambda key, **_: "/qlog/" in key and not log_writes.append(key))
    caplog.set_level(logging.WARNING, logger="lucidrag.base.bookkeeping")
    for n in range(4):
        response = await harness.retrieve(KB, f"solar array {n}")
        assert response.results[0].metadata["file_id"] == solar.document_id and not response.metadata
        await harness.ingest(KB, f"more{n}.txt", f"Wind turbine {n} on the roof of building D.".encode())
    data = await api(page, "/analytics", kb_id=KB)  # the console tries again too
    assert [q["question"] for q in data["questions"]] == [f"solar array {n}" for n in (3, 2, 1, 0)]
    failures = data["bookkeeping_errors"]
    assert log_writes and failures["count"] == len(log_writes) and "refused 1 write(s)" in failures["last"]
    assert len([r for r in caplog.records if r.name == "lucidrag.base.bookkeeping"]) == 1

    host.faults.clear()
    data = await api(page, "/analytics", kb_id=KB)
    assert stored_questions(host) == [f"solar array {n}" for n in range(4)]
    assert data["bookkeeping_errors"]["count"] == len(log_writes)
