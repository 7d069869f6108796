"""What LangBot is told about an upload is true, and the ingest answers within LangBot's timeout.

The ingest's work (parse, embed, upsert) stops at the component's limit; after that its file is
either committed or rolled back, never left half way: COMPLETED only for a file a restart keeps,
FAILED only for a file that is never answered. The plugin's times are shortened together with
LangBot's (1200 s here becomes LANGBOT_INGEST_S) and the slow host is one whose calls never answer
(`FakeHost.hang`), so nothing depends on how fast this machine is.
"""

from __future__ import annotations

import asyncio

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

import components.knowledge_engine.lucid_rag as component_module
from lucidrag.base import budget
from lucidrag.state.storage_keys import journal_key
from tests.conftest import Harness
from tests.test_state_runtime import restarted

KB = "kb-deadlines"
TEA = b"Oolong tea is partially oxidised. The Tieguanyin cultivar comes from Anxi in Fujian."
SOLAR = b"The solar array on building C produces 42 kilowatts at noon in June."
WORK_S, COMMIT_S, ROLLBACK_S = 2.0, 0.5, 0.5
LANGBOT_INGEST_S = WORK_S + COMMIT_S + ROLLBACK_S + 1.0  # as 1100 + 20 + 50 s of LangBot's 1200 s


@pytest.fixture(autouse=True)
def short_ingest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(component_module, "INGEST_TIMEOUT_S", WORK_S)
    monkeypatch.setattr(budget, "INGEST_COMMIT_S", COMMIT_S)
    monkeypatch.setattr(budget, "INGEST_ROLLBACK_S", ROLLBACK_S)


async def ingest_within_langbots_time(harness: Harness, name: str, data: bytes, document_id: str):
    return await asyncio.wait_for(harness.ingest(KB, name, data, document_id=document_id), LANGBOT_INGEST_S)


async def answered(harness: Harness, query: str, document_id: str) -> dict[str, bool]:
    out = {}
    for mode in ("vector", "keyword"):
        response = await harness.retrieve(KB, query, settings={"search_mode": mode})
        out[mode] = any(e.metadata.get("file_id") == document_id for e in response.results)
    return out


async def test_a_commit_whose_last_storage_call_outlives_the_work_time_completes(harness: Harness, host):
    """The ingest's time must not cancel the commit wherever it is: here after the file was
    committed, while its journal entry was being deleted, so LangBot was told FAILED for a file
    every query answers."""
    await harness.ingest(KB, "tea.txt", TEA)
    host.hang("delete_plugin_storage", when=lambda key, **_: "/journal/" in key)

    result = await ingest_within_langbots_time(harness, "solar.txt", SOLAR, "solar")

    assert result.status == DocumentStatus.COMPLETED, result.error_message
    host.hangs.clear()
    back = restarted(host)
    assert await answered(back, "solar array kilowatts", "solar") == {"vector": True, "keyword": True}
    assert await answered(harness, "solar array kilowatts", "solar") == {"vector": True, "keyword": True}
    assert journal_key(KB, "solar") not in host.storage, "the entry the commit could not delete goes later"


async def test_an_ingest_whose_commit_waits_too_long_for_the_kb_fails_and_leaves_nothing(harness: Harness, host):
    """Another change holds the KB (a long commit or load) past the commit's time: the file fails,
    and nothing of it is left to be adopted by a restart."""
    await harness.ingest(KB, "tea.txt", TEA)
    state = harness.host.engine.installation("dedicated").kb(KB)
    await state.lock.acquire()
    try:
        result = await ingest_within_langbots_time(harness, "solar.txt", SOLAR, "solar")
    finally:
        state.lock.release()

    assert result.status == DocumentStatus.FAILED
    assert "solar" not in state.in_flight
    assert host.vectors_of(KB, "solar") == []
    assert await answered(harness, "solar array kilowatts", "solar") == {"vector": False, "keyword": False}
    assert journal_key(KB, "solar") not in host.storage, "the failed file is settled by a later request"
    back = restarted(host)
    assert await answered(back, "solar array kilowatts", "solar") == {"vector": False, "keyword": False}


async def test_the_rollback_of_an_ingest_that_ran_out_of_time_ends_within_langbots_timeout(harness: Harness, host):
    """The vector DB stops answering while the file's vectors are written, and then while they are
    deleted: the ingest answers FAILED in time, and a later request removes what may be left."""
    await harness.ingest(KB, "tea.txt", TEA)
    host.hang("vector_upsert")
    host.hang("vector_delete")

    result = await ingest_within_langbots_time(harness, "solar.txt", SOLAR, "solar")

    assert result.status == DocumentStatus.FAILED
    assert "took longer than 2 s" in (result.error_message or "")
    host.hangs.clear()
    assert await answered(harness, "solar array kilowatts", "solar") == {"vector": False, "keyword": False}
    # the unanswered upsert may still land: the next process settles the file
    assert journal_key(KB, "solar") in host.storage
    back = restarted(host)
    assert await answered(back, "solar array kilowatts", "solar") == {"vector": False, "keyword": False}
    assert journal_key(KB, "solar") not in host.storage, "the failed file is settled after the restart"
