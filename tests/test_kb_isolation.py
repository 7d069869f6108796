"""One knowledge base never holds up or stops another's work, and a deleted one leaves nothing.

Upkeep (the unfinished work every hook continues) visits every KB of the installation: it must
not wait behind another hook's change of one KB, and one KB's failure -- say, a KB LangBot
deleted while the plugin was down -- must not stop the others'. Every KB's meta still to be
written goes before any KB's other work: while storage holds "never had a vector" a process that
dies leaves vectors no later process looks at. A KB deleted while a file is
being ingested into it keeps none of the file's vectors or keys.
"""

from __future__ import annotations

import asyncio

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from lucidrag.base import budget
from lucidrag.state.storage_keys import file_record_key, meta_key
from lucidrag.state.store import JournalEntry, KbStore
from tests.conftest import FakePlugin, Harness
from tests.test_state_runtime import long_text, restarted

TEA = b"Oolong tea is partially oxidised. The Tieguanyin cultivar comes from Anxi in Fujian."
SOLAR = b"The solar array on building C produces 42 kilowatts at noon in June."
BIG = long_text(1000)  # two upsert batches


def keys_of_kb(host: FakePlugin, kb_id: str) -> list[str]:
    return [k for k in host.storage if f"/kb/{kb_id}/" in k]


def has_record(host: FakePlugin, kb_id: str, file_id: str) -> bool:
    return any(k.startswith(file_record_key(kb_id, file_id)) for k in host.storage)


async def created(harness: Harness, *kbs: str) -> None:
    for kb in kbs:
        await harness.component.on_knowledge_base_create(kb, {"embedding_model_uuid": "embed-model-1"})
        await harness.ingest(kb, "tea.txt", TEA)


async def test_a_delete_answers_in_time_while_another_kbs_unfinished_work_is_held_up(harness: Harness, host,
                                                                                      monkeypatch: pytest.MonkeyPatch):
    """KB A has a record to save later; a long change of A (a commit on slow storage) holds it.
    A delete in KB B must not wait for A in its upkeep, past LangBot's 30 s."""
    monkeypatch.setitem(budget.HOOK_TIMEOUT_S, "delete", 3.0)  # LangBot's 30 s, shortened
    await created(harness, "kb-a", "kb-b")
    host.fail("set_plugin_storage", when=lambda key, **_: "/kb/kb-a/file/" in key)
    solar = await harness.ingest("kb-a", "solar.txt", SOLAR)
    tea_b = await harness.ingest("kb-b", "tea2.txt", TEA + b" Second harvest.")
    host.faults.clear()
    a = harness.host.engine.installation("dedicated").kb("kb-a")
    assert a.unsaved, "kb-a has unfinished work"

    await a.lock.acquire()
    try:
        assert await asyncio.wait_for(harness.component.delete_document("kb-b", tea_b.document_id), 3.0) is True
    finally:
        a.lock.release()
    await harness.retrieve("kb-b", "anything")
    assert has_record(host, "kb-a", solar.document_id), "kb-a's work is done by a later request"


def upsert_held_at_second_batch(host: FakePlugin, kb_id: str) -> tuple[asyncio.Event, asyncio.Event]:
    """The KB's second upsert batch waits for `release`; `reached` is set when it got there."""
    reached, release = asyncio.Event(), asyncio.Event()
    real = host.vector_upsert
    batches = 0

    async def upsert(collection_id: str, *args, **kwargs):
        nonlocal batches
        if collection_id == kb_id:
            batches += 1
            if batches == 2:
                reached.set()
                await release.wait()
        return await real(collection_id, *args, **kwargs)

    host.vector_upsert = upsert  # type: ignore[method-assign]
    return reached, release


async def test_a_kb_deleted_while_a_file_is_ingested_into_it_keeps_nothing_of_the_file(harness: Harness, host):
    await created(harness, "kb-x", "kb-y")
    reached, release = upsert_held_at_second_batch(host, "kb-x")
    ingest = asyncio.ensure_future(harness.ingest("kb-x", "big.txt", BIG, document_id="big"))
    await reached.wait()
    deletion = asyncio.ensure_future(harness.component.on_knowledge_base_delete("kb-x"))
    while "kb-x" in harness.host.engine.installation("dedicated").kbs:
        await asyncio.sleep(0)  # the deletion has begun; the batch under way lands now
    release.set()
    await deletion
    result = await ingest

    assert host.vector_count("kb-x") == 0
    assert keys_of_kb(host, "kb-x") == []
    assert result.status == DocumentStatus.FAILED
    assert any("Tieguanyin" in t for t in await harness.texts("kb-y", "Tieguanyin cultivar"))


async def test_an_upload_langbot_refuses_after_its_kb_was_deleted_leaves_no_key(harness: Harness, host,
                                                                                monkeypatch: pytest.MonkeyPatch):
    """The batch under way lands only after the KB's deletion ended and LangBot dropped the KB:
    LangBot refuses it, and the failed upload writes nothing (no journal entry, no failure record)
    for a KB that no longer exists."""
    monkeypatch.setitem(budget.HOOK_TIMEOUT_S, "kb_delete", 1.0)
    await created(harness, "kb-x", "kb-y")
    reached, release = upsert_held_at_second_batch(host, "kb-x")
    ingest = asyncio.ensure_future(harness.ingest("kb-x", "big.txt", BIG, document_id="big"))
    await reached.wait()
    await harness.component.on_knowledge_base_delete("kb-x")
    release.set()
    result = await ingest

    assert keys_of_kb(host, "kb-x") == []
    assert result.status == DocumentStatus.FAILED


async def test_a_kb_langbot_deleted_while_the_plugin_was_down_stops_no_other_kbs_work(host):
    """A restart finds the journal entry of an ingest into a KB that LangBot has deleted since
    (its vector calls are refused). The other KBs' unfinished work still gets done, and the
    deleted KB's keys go."""
    harness = Harness(host)
    await created(harness, "kb-x", "kb-y", "kb-z")
    await harness.invoke(KbStore(host, "kb-x").write_journal, JournalEntry("crashed", 12))  # never committed
    host.deleted_kbs.add("kb-x")

    back = restarted(host)
    back.host.deleted_kbs = host.deleted_kbs
    await back.retrieve("kb-y", "tea")  # the first request after the restart finds the entry
    back.host.fail("set_plugin_storage", when=lambda key, **_: "/kb/kb-z/file/" in key)
    solar = await back.ingest("kb-z", "solar.txt", SOLAR)
    back.host.faults.clear()
    for _ in range(3):
        await back.component.delete_document("kb-y", "nothing-to-delete")

    assert has_record(host, "kb-z", solar.document_id), "kb-z's record is saved by the later requests"
    assert keys_of_kb(host, "kb-x") == []


async def test_upkeep_saves_every_kbs_unsaved_meta_before_any_kbs_other_work(harness: Harness, host):
    """The query's own KB has a record to write again, another KB its "has had vectors" mark
    (storage refused both): the mark is written first."""
    await created(harness, "kb-query")
    await harness.component.on_knowledge_base_create("kb-marked", {"embedding_model_uuid": "embed-model-1"})
    host.fail("set_plugin_storage", when=lambda key, **_: key == meta_key("kb-marked")
              or key.startswith(file_record_key("kb-query", "")))
    await harness.ingest("kb-marked", "tea.txt", TEA)
    solar = await harness.ingest("kb-query", "solar.txt", SOLAR)
    assert solar.status == DocumentStatus.COMPLETED and not has_record(host, "kb-query", solar.document_id)
    host.faults.clear()
    written: list[str] = []
    set_value = host.set_plugin_storage

    async def noting(key: str, value: bytes) -> None:
        written.append(key)
        await set_value(key, value)

    host.set_plugin_storage = noting
    await harness.retrieve("kb-query", "solar array")
    record = next(i for i, k in enumerate(written) if k.startswith(file_record_key("kb-query", solar.document_id)))
    assert meta_key("kb-marked") in written[:record], written
