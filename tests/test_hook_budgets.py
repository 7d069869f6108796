"""Every hook answers within LangBot's timeout for it, however slow the host is.

The hooks are called as LangBot calls them, under `asyncio.wait_for(hook, timeout)`: a hook that
overran would raise TimeoutError here, as LangBot records a failure there. The timeouts are
shortened (the plugin's own constant, HOOK_TIMEOUT_S, and the test's wait alike) and the slow host
is one whose calls never answer (`FakeHost.hang`), so nothing depends on how fast this machine is.
What a hook could not finish must be finished by later hooks."""

from __future__ import annotations

import asyncio
import time

import pytest

from lucidrag.base import budget
from lucidrag.state.storage_keys import file_record_key, journal_key
from tests.conftest import Harness
from tests.test_state_runtime import restarted

KB = "kb-budgets"
# LangBot's 30-60 s shortened to 3 s: the plugin's reserve (budget.HOOK_RESERVE, 20 %) is then 0.6 s,
# what a busy 2-core machine may take to run the hook again once its time is up (at 0.6 s timeouts,
# a 0.12 s reserve, the hook overran by up to 0.23 s there)
TIMEOUT = {"ingest": 1200.0, "retrieve": 3.0, "delete": 3.0, "create": 3.0, "kb_delete": 3.0}
MANUAL = "\n\n".join(f"Pump P-{i} needs its seal replaced every {i * 100} hours." for i in range(40)).encode()
TEA = b"Oolong tea is partially oxidised. The Tieguanyin cultivar comes from Anxi in Fujian."


@pytest.fixture(autouse=True)
def short_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "HOOK_TIMEOUT_S", dict(TIMEOUT))


async def within(hook: str, call):
    """Run a hook as LangBot does: it gives up after the hook's timeout."""
    return await asyncio.wait_for(call, TIMEOUT[hook])


def keys_of(host, file_id: str) -> list[str]:
    return [k for k in host.storage if k.startswith(file_record_key(KB, file_id)) or k == journal_key(KB, file_id)]


async def test_a_delete_whose_bookkeeping_hangs_answers_false_in_time_and_a_retry_finishes_it(harness: Harness, host):
    """True only once the deletion survives a restart: storage that hangs gives False in time,
    before any vector goes (LangBot keeps the file, whole), and the operator's second delete
    finishes it."""
    await harness.ingest(KB, "tea.txt", TEA)
    gone = await harness.ingest(KB, "pumps.txt", MANUAL)
    assert keys_of(host, gone.document_id)
    for method in ("set_plugin_storage", "get_plugin_storage", "delete_plugin_storage", "get_plugin_storage_keys"):
        host.hang(method)  # plugin storage stops answering right after the vectors are deleted

    assert await within("delete", harness.component.delete_document(KB, gone.document_id)) is False
    assert host.vectors_of(KB, gone.document_id)

    host.hangs.clear()
    assert await within("delete", harness.component.delete_document(KB, gone.document_id)) is True
    assert keys_of(host, gone.document_id) == []
    back = restarted(host)
    texts = await back.texts(KB, "seal replaced hours pump", settings={"search_mode": "keyword"})
    assert not any("P-3 needs" in t for t in texts)
    assert any("Tieguanyin" in t for t in await back.texts(KB, "Tieguanyin cultivar", settings={"search_mode": "keyword"}))


async def test_a_delete_the_vector_db_does_not_answer_fails_in_time_and_succeeds_when_retried(harness: Harness, host):
    result = await harness.ingest(KB, "pumps.txt", MANUAL)
    host.hang("vector_delete")

    assert await within("delete", harness.component.delete_document(KB, result.document_id)) is False
    host.hangs.clear()
    assert await within("delete", harness.component.delete_document(KB, result.document_id)) is True
    assert host.vectors_of(KB, result.document_id) == []
    # LangBot may still do the delete given up on: the file's entry "0 chunks" is left to the next
    # process, which removes it once that delete can no longer land
    back = restarted(host)
    await back.retrieve(KB, "seal of pump P-7")
    assert keys_of(host, result.document_id) == []


async def test_kb_create_and_delete_answer_in_time_when_plugin_storage_hangs(harness: Harness, host):
    await harness.ingest(KB, "pumps.txt", MANUAL)
    host.hang("set_plugin_storage")
    host.hang("get_plugin_storage_keys")
    await within("create", harness.component.on_knowledge_base_create("kb-new", {"embedding_model_uuid": "m"}))
    await within("kb_delete", harness.lucid.on_knowledge_base_delete(KB))  # the hook itself, no test wrapper
    host.hangs.clear()
    assert host.vector_count(KB) == 0  # the vectors went inside the hook


async def test_retrieve_answers_in_time_when_plugin_storage_hangs_after_a_restart(harness: Harness, host):
    await harness.ingest(KB, "pumps.txt", MANUAL)
    back = restarted(host)
    back.host.hang("get_plugin_storage")
    back.host.hang("get_plugin_storage_keys")
    await within("retrieve", back.retrieve(KB, "seal of pump P-7"))  # answers, if with nothing
    back.host.hangs.clear()
    state = back.host.engine.installation("dedicated").kb(KB)
    assert not state.loaded  # a load cut short is not taken for a KB without a snapshot
    texts = await within("retrieve", back.texts(KB, "seal of pump P-7", settings={"search_mode": "keyword"}))
    assert any("P-7 needs" in t for t in texts) and not state.indexing


async def test_unfinished_work_never_holds_a_query_up_for_long_when_storage_hangs(harness: Harness, host, monkeypatch):
    """A record that could not be saved is retried at the start of the next hooks; if storage now
    hangs, the query still gets its answer once upkeep's own short budget is spent."""
    from lucidrag import engine

    monkeypatch.setitem(budget.HOOK_TIMEOUT_S, "retrieve", 120.0)
    monkeypatch.setattr(engine, "UPKEEP_STEP_SLACK_S", 0.2)
    monkeypatch.setitem(engine.UPKEEP_BUDGET_S, "retrieve", 0.2)
    await harness.texts(KB, "anything")  # the KB is loaded before the failing ingest
    host.fail("set_plugin_storage", when=lambda key: "/file/" in key)
    await harness.ingest(KB, "pumps.txt", MANUAL)
    assert host.engine.installation("dedicated").kb(KB).unsaved
    host.faults.clear()
    host.hang("set_plugin_storage")

    texts = await asyncio.wait_for(harness.texts(KB, "seal of pump P-7"), 30.0)  # held up by the hung storage: ~96 s
    assert any("P-7 needs" in t for t in texts)


async def test_a_delete_behind_an_ingest_that_holds_the_kb_answers_false_in_time_and_deletes_nothing(harness: Harness, host):
    """delete_document waited for the KB lock without a bound: behind an ingest whose commit hangs
    on plugin storage it never answered (LangBot gives up after 30 s and shows the delete as
    failed, whatever happens later). Now it answers False in time, having deleted nothing."""
    kept = await harness.ingest(KB, "tea.txt", TEA)
    saving = asyncio.Event()

    def record_save(key: str, **_: object) -> bool:
        if "/file/" not in key:
            return False
        saving.set()
        return True

    host.hang("set_plugin_storage", when=record_save)  # the next commit hangs holding the KB
    ingest = asyncio.ensure_future(harness.ingest(KB, "pumps.txt", MANUAL))
    await saving.wait()
    try:
        assert await within("delete", harness.component.delete_document(KB, kept.document_id)) is False
        assert host.vectors_of(KB, kept.document_id), "nothing is deleted without the lock"
    finally:
        ingest.cancel()
    host.hangs.clear()
    assert await within("delete", harness.component.delete_document(KB, kept.document_id)) is True
    assert host.vectors_of(KB, kept.document_id) == []


async def test_indexing_stops_once_the_hooks_time_is_used_up(harness: Harness, host):
    """Records that cannot be read for lack of time stay queued for a later hook; the slice ends
    at once instead of reading nothing again and again until its own deadline."""
    await harness.ingest("kb-budget", "tea.txt", b"Oolong tea is partially oxidised.")
    state = harness.host.engine.installation("dedicated").kb("kb-budget")
    state.files.to_index("not-read-yet")
    reads = 0
    real = state.file_records

    async def counted(*args, **kwargs):
        nonlocal reads
        reads += 1
        return await real(*args, **kwargs)

    state.file_records = counted  # type: ignore[method-assign]

    async def a_slice_with_no_time_left() -> None:
        with budget.budget(0.0):
            await state.continue_indexing(host, "kb-budget", time.monotonic() + 2.0)

    await harness.invoke(a_slice_with_no_time_left)
    assert reads <= 1
    assert "not-read-yet" in state.to_index, "left for a later hook"
