"""The console's query analytics: what users asked each knowledge base, kept as a bounded ring in
plugin storage beside the hooks. Driven through the real KnowledgeEngine and Page components on
the contract-following fake host."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import zlib

import pytest

from lucidrag.base import alongside
from lucidrag.engine import Engine
from lucidrag.state.store import PART_SIZE
from tests.test_console import KB, SOLAR, TEA, ConsoleHost, api, create_kb, host, page  # noqa: F401 - fixtures
from tests.conftest import Harness

from components.pages.console.console import LucidRagConsole

SOLAR_Q = "How much does the solar array on building C produce?"


def log_keys(host: ConsoleHost, kb_id: str = KB) -> list[str]:
    return sorted(k for k in host.storage if k.startswith(f"lucidrag/v1/kb/{kb_id}/qlog/"))


def stored_log_text(host: ConsoleHost) -> str:
    return "".join(zlib.decompress(host.storage[k][2:]).decode() for k in log_keys(host))


def restarted(host: ConsoleHost) -> tuple[Harness, LucidRagConsole]:
    """The plugin process again, on the same LangBot (its plugin storage and vector DB)."""
    host.engine = Engine()
    page = LucidRagConsole()
    page.plugin = host  # type: ignore[assignment]
    return Harness(host), page


async def kb_with_two_files(harness: Harness, host: ConsoleHost) -> dict[str, str]:
    await create_kb(harness, host)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    tea = await harness.ingest(KB, "tea.txt", TEA)
    return {"solar": solar.document_id, "tea": tea.document_id}


async def test_recent_questions_show_mode_latency_results_and_top_files_newest_first(harness: Harness, host, page):
    files = await kb_with_two_files(harness, host)
    await harness.retrieve(KB, SOLAR_Q, settings={"top_k": 1})
    await harness.retrieve(KB, "zygomorphic xylophones", settings={"search_mode": "keyword"})
    data = await api(page, "/analytics", kb_id=KB)
    latest, first = data["questions"]
    assert latest["question"] == "zygomorphic xylophones" and latest["mode"] == "keyword"
    assert latest["nothing_found"] is True and latest["results"] == 0 and latest["files"] == []
    assert first["question"] == SOLAR_Q and first["mode"] == "hybrid" and first["results"] == 1
    assert first["files"][0]["file_id"] == files["solar"] and first["files"][0]["score"] > 0
    assert first["files"][0]["document_name"]
    assert first["latency_ms"] > 0 and latest["at"] >= first["at"]

    hour = data["windows"]["hour"]
    assert hour["questions"] == 2 and hour["nothing_found"] == 1 and hour["nothing_found_rate"] == 0.5
    assert hour["top_k_fill"] == 0.5  # 1 of 1, then 0 of 5
    assert all(hour["latency_ms"][p] is not None for p in ("p50", "p95", "p99"))
    assert [f["file_id"] for f in hour["files_most_returned"]] == [files["solar"]]
    assert [f["file_id"] for f in hour["files_never_returned"]] == [files["tea"]]
    assert hour["slowest"][0]["latency_ms"] == max(first["latency_ms"], latest["latency_ms"])
    assert data["windows"]["week"]["questions"] == 2


async def test_repeated_questions_are_counted_together_and_ranked_most_frequent(harness: Harness, host, page):
    await kb_with_two_files(harness, host)
    for question in ["Where does Tieguanyin come from?", "where does  tieguanyin come from?", SOLAR_Q]:
        await harness.retrieve(KB, question)
    frequent = (await api(page, "/analytics", kb_id=KB))["windows"]["day"]["most_frequent"]
    assert frequent[0]["count"] == 2 and frequent[0]["question"].lower().startswith("where does")
    assert frequent[1] == {"question": SOLAR_Q, "hash": frequent[1]["hash"], "count": 1}


async def test_the_consoles_own_searches_are_not_logged(harness: Harness, host, page):
    await kb_with_two_files(harness, host)
    await api(page, "/search", kb_id=KB, query="solar array")
    assert (await api(page, "/analytics", kb_id=KB))["questions"] == []


async def test_hash_mode_keeps_no_question_text_and_off_keeps_nothing(harness: Harness, host, page):
    await kb_with_two_files(harness, host)
    pipeline = {"session_name": "person_4242", "sender_id": "user-777", "bot_uuid": "bot-1"}
    await harness.retrieve(KB, SOLAR_Q, settings={"query_log": "hash", **pipeline})
    await harness.retrieve(KB, "Where is Anxi?", settings={"query_log": "off", **pipeline})
    data = await api(page, "/analytics", kb_id=KB)
    [row] = data["questions"]
    assert row["question"] == "" and len(row["hash"]) == 16 and row["results"] > 0
    stored = stored_log_text(host)
    assert stored and "solar" not in stored.lower() and "Anxi" not in stored
    for secret in pipeline.values():
        assert secret not in stored and secret not in json.dumps(data)


async def test_the_log_is_written_by_later_hooks_survives_a_restart_and_goes_with_the_kb(harness: Harness, host):
    await kb_with_two_files(harness, host)
    await harness.retrieve(KB, SOLAR_Q)
    await harness.retrieve(KB, "Where does Tieguanyin come from?")
    await harness.ingest(KB, "more.txt", b"A third file about wind turbines on the roof.")
    assert SOLAR_Q in stored_log_text(host)  # no console was opened: the hooks wrote it

    harness, page = restarted(host)
    await harness.retrieve(KB, "wind turbines")
    questions = [q["question"] for q in (await api(page, "/analytics", kb_id=KB))["questions"]]
    assert questions == ["wind turbines", "Where does Tieguanyin come from?", SOLAR_Q]

    await harness.component.on_knowledge_base_delete(KB)
    await harness.retrieve("kb-other", "anything")  # a later hook finishes the KB's deletion
    assert log_keys(host) == []


async def test_a_query_never_waits_for_the_log_write(harness: Harness, host, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(alongside, "DRAIN_S", 3600.0)  # other work beside a hook is waited for
    await kb_with_two_files(harness, host)
    await harness.retrieve(KB, SOLAR_Q)
    hanging: list[str] = []

    def log_write(key: str, **_: object) -> bool:
        if "/qlog/" in key:
            hanging.append(key)
        return "/qlog/" in key

    host.hang("set_plugin_storage", when=log_write)  # LangBot never answers the log's write
    response = await asyncio.wait_for(harness.retrieve(KB, "Where does Tieguanyin come from?"), 20)
    assert response.results and hanging
    assert host.refused["set_plugin_storage"] == 0


async def test_broken_plugin_storage_never_fails_a_query_and_the_console_still_shows_them(harness: Harness, host, page):
    await kb_with_two_files(harness, host)
    host.fail("set_plugin_storage", when=lambda key: "/qlog/" in key)
    for n in range(3):
        assert (await harness.retrieve(KB, f"{SOLAR_Q} {n}")).results
    assert len((await api(page, "/analytics", kb_id=KB))["questions"]) == 3
    host.faults.clear()
    await api(page, "/analytics", kb_id=KB)
    assert f"{SOLAR_Q} 2" in stored_log_text(host)


async def test_the_ring_keeps_the_last_n_questions_in_a_few_values_under_the_part_size(harness: Harness, host, page):
    await kb_with_two_files(harness, host)
    long_question = "太阳能电池板的发电量是多少" * 40  # 520 CJK characters: 500 are kept
    for n in range(60):
        await harness.retrieve(KB, f"{n} {long_question}", settings={"query_log_size": 50, "search_mode": "keyword"})
    data = await api(page, "/analytics", kb_id=KB)
    assert data["kept"] == 50 and data["capacity"] == 50
    assert [q["question"].split()[0] for q in data["questions"]] == [str(n) for n in range(59, 9, -1)]
    assert all(len(q["question"]) == 500 for q in data["questions"])
    keys = log_keys(host)
    assert 1 <= len(keys) <= 4 and all(len(host.storage[k]) <= PART_SIZE for k in keys)

    harness, page = restarted(host)
    again = await api(page, "/analytics", kb_id=KB)
    assert [q["question"] for q in again["questions"]][:50] == [q["question"] for q in data["questions"]]


async def test_export_as_csv_and_json_and_clear(harness: Harness, host, page):
    await kb_with_two_files(harness, host)
    await harness.retrieve(KB, SOLAR_Q, settings={"top_k": 1})
    await harness.retrieve(KB, "问：乌龙茶产自哪里？")
    exported = await api(page, "/analytics/export", kb_id=KB, format="csv")
    assert exported["filename"].endswith(".csv") and exported["count"] == 2
    table = list(csv.DictReader(io.StringIO(exported["content"])))
    assert [r["question"] for r in table] == ["问：乌龙茶产自哪里？", SOLAR_Q]
    assert table[1]["results"] == "1" and table[1]["nothing_found"] == "no" and "(0." in table[1]["top_files"]
    as_json = await api(page, "/analytics/export", kb_id=KB, format="json")
    assert [q["question"] for q in json.loads(as_json["content"])] == ["问：乌龙茶产自哪里？", SOLAR_Q]

    assert log_keys(host)
    assert (await api(page, "/analytics/clear", kb_id=KB)) == {"cleared": True}
    assert log_keys(host) == [] and (await api(page, "/analytics", kb_id=KB))["questions"] == []
    harness, page = restarted(host)
    assert (await api(page, "/analytics", kb_id=KB))["questions"] == []


async def test_another_kb_and_another_installation_see_only_their_own_questions(harness: Harness, host, page):
    await kb_with_two_files(harness, host)
    await create_kb(harness, host, "kb-two", "Second")
    await harness.ingest("kb-two", "tea.txt", TEA)
    await harness.retrieve(KB, SOLAR_Q)
    await harness.retrieve("kb-two", "oolong")
    assert [q["question"] for q in (await api(page, "/analytics", kb_id=KB))["questions"]] == [SOLAR_Q]
    assert [q["question"] for q in (await api(page, "/analytics", kb_id="kb-two"))["questions"]] == ["oolong"]
    data = await api(page, "/analytics", kb_id="kb-elsewhere")
    assert "not a LucidRAG knowledge base" in data["error"]




async def test_after_a_restart_the_hooks_add_to_the_stored_questions_instead_of_overwriting_them(harness: Harness, host):
    await kb_with_two_files(harness, host)
    for n in range(3):
        await harness.retrieve(KB, f"before the restart {n}")
    await harness.ingest(KB, "more.txt", b"A third file about wind turbines on the roof.")
    harness, _ = restarted(host)
    for n in range(3):
        await harness.retrieve(KB, f"after the restart {n}")
    await harness.ingest(KB, "more2.txt", b"A fourth file about heat pumps in the basement.")
    stored = stored_log_text(host)  # written by the hooks alone, no console opened
    assert all(f"before the restart {n}" in stored and f"after the restart {n}" in stored for n in range(3))
