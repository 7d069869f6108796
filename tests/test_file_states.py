"""What each state of a file means to someone asking the bot: a file that is still uploading, whose
upload failed or was cut off by a crash, or that is being deleted is never an answer, in any
search mode, and never enters the keyword index; once the upload commits it is answered.

Each test drives the real component on the fake host into one of those moments (a host call held
open with events, or failing) and asks the bot. Together they fail when any state is left out of
what may be answered or indexed (lucidrag/state/lifecycle.py), or a transition is skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from lucidrag.state.lifecycle import FileState
from lucidrag.state.storage_keys import file_record_key, index_manifest_key, journal_key
from tests import test_state_runtime
from tests.conftest import FakePlugin, Harness
from tests.fakes import ActionCallTimeoutError
from tests.test_late_writes import answer_lost_once
from tests.test_state_runtime import crash_during_upsert, long_text, restarted

KB = "kb-states"
SOLAR = b"The solar array on building C produces 42 kilowatts at noon in June."
NEW_SOLAR = b"The old panels on building C were replaced by a wind turbine in 2031."
TEA = b"Oolong tea is partially oxidised. The Tieguanyin cultivar comes from Anxi in Fujian."
SOLAR_QUESTION = "solar array kilowatts"
MODES = ("vector", "keyword", "hybrid")


# A query never waits for a held upload or delete; a broken state would make it wait for the held
# call forever: this turns that deadlock into a failure (it is no measure of speed).
DEADLOCK_S = 30


async def answered_files(harness: Harness, query: str, mode: str, kb: str = KB) -> list[str]:
    response = await asyncio.wait_for(harness.retrieve(kb, query, settings={"search_mode": mode, "top_k": 10}),
                                      DEADLOCK_S)
    return [entry.metadata["file_id"] for entry in response.results]


def state_of(harness: Harness, kb: str = KB) -> Any:
    return harness.host.engine.installation("dedicated").kb(kb)


def held(call: Callable[..., Awaitable[Any]], when: Callable[..., bool], reached: asyncio.Event,
         release: asyncio.Event) -> Callable[..., Awaitable[Any]]:
    """`call`, except that a call where `when(*args)` waits for `release` before the host acts."""
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        if when(*args, **kwargs):
            reached.set()
            await release.wait()
        return await call(*args, **kwargs)
    return wrapper


def answer_held(call: Callable[..., Awaitable[Any]], when: Callable[..., bool], reached: asyncio.Event,
                release: asyncio.Event) -> Callable[..., Awaitable[Any]]:
    """`call`, except that a call where `when(*args)` is done by the host at once and its answer
    waits for `release` (what the caller gets is what the host held before anything else ran)."""
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        answer = await call(*args, **kwargs)
        if when(*args, **kwargs):
            reached.set()
            await release.wait()
        return answer
    return wrapper


def every_call(*_: Any, **__: Any) -> bool:
    return True


async def until(event: asyncio.Event, *tasks: asyncio.Future[Any]) -> None:
    """Wait for `event`; fail at once if one of `tasks` ends first (it never reached that moment)."""
    waiter = asyncio.ensure_future(event.wait())
    done, _ = await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
    if waiter not in done:
        waiter.cancel()
        raise AssertionError("the moment the test waits for never came")


def is_record_of(file_id: str) -> Callable[..., bool]:
    return lambda key, *_, **__: key.startswith(file_record_key(KB, file_id))


def once(when: Callable[..., bool]) -> Callable[..., bool]:
    seen = {"done": False}

    def first(*args: Any, **kwargs: Any) -> bool:
        if seen["done"] or not when(*args, **kwargs):
            return False
        seen["done"] = True
        return True
    return first


@contextlib.asynccontextmanager
async def a_kb(host: FakePlugin, files: dict[str, bytes], still_indexing: bool) -> AsyncIterator[Harness]:
    """A KB holding `files` (and the tea note). `still_indexing`: a restarted plugin whose keyword
    index is still being built from the records (held at reading the tea note's), so vector hits
    of any file may be answers: only the file's state tells which are not."""
    harness = Harness(host)
    for file_id, data in {"tea": TEA, **files}.items():
        await harness.ingest(KB, f"{file_id}.txt", data, document_id=file_id)
    if not still_indexing:
        yield harness
        return
    del host.storage[index_manifest_key(KB)]  # a restart without a snapshot indexes from the records
    back = restarted(host)
    reading, release = asyncio.Event(), asyncio.Event()
    back.host.get_plugin_storage = held(back.host.get_plugin_storage, once(is_record_of("tea")),  # type: ignore[method-assign]
                                        reading, release)
    indexing = asyncio.ensure_future(back.retrieve(KB, "tea"))
    await until(reading, indexing)
    assert state_of(back).indexing
    try:
        yield back
    finally:
        release.set()
        await indexing


# Modes a query may use while the index is still being built: vector mode does not wait for it.
def modes(still_indexing: bool) -> tuple[str, ...]:
    return ("vector",) if still_indexing else MODES


STILL_INDEXING = pytest.mark.parametrize("still_indexing", [False, True], ids=["settled", "still-indexing"])


# --------------------------------------------------------------------------- uploading
@STILL_INDEXING
async def test_a_file_still_uploading_is_not_answered_until_its_upload_commits(host: FakePlugin, still_indexing: bool):
    async with a_kb(host, {}, still_indexing) as harness:
        reached, release = asyncio.Event(), asyncio.Event()
        write = harness.host.set_plugin_storage
        harness.host.set_plugin_storage = held(write, once(is_record_of("solar")), reached, release)  # type: ignore[method-assign]
        upload = asyncio.ensure_future(harness.ingest(KB, "solar.txt", SOLAR, document_id="solar"))
        await until(reached, upload)
        try:
            assert host.vectors_of(KB, "solar"), "its vectors are in the vector DB already"
            for mode in modes(still_indexing):
                assert "solar" not in await answered_files(harness, SOLAR_QUESTION, mode), mode
        finally:
            release.set()
        assert (await upload).status == DocumentStatus.COMPLETED
        for mode in modes(still_indexing):
            assert (await answered_files(harness, SOLAR_QUESTION, mode))[0] == "solar", mode


# --------------------------------------------------------------------------- failed uploads
def failing_after_its_first_batch(host: FakePlugin) -> None:
    """The upload's second vector batch fails, and so does every attempt to remove the first."""
    upserts = {"n": 0}

    def second_batch(**_: Any) -> bool:
        upserts["n"] += 1
        return upserts["n"] >= 2
    host.fail("vector_upsert", when=second_batch)
    host.fail("vector_delete")


@STILL_INDEXING
async def test_a_failed_upload_whose_vectors_could_not_be_removed_is_never_answered(host: FakePlugin,
                                                                                     still_indexing: bool):
    question = "How often is component QX-7 inspected?"
    async with a_kb(host, {}, still_indexing) as harness:
        failing_after_its_first_batch(harness.host)
        result = await harness.ingest(KB, "parts.txt", long_text(400), document_id="parts",
                                      settings={"chunk_size": 128, "chunk_overlap": 0})
        assert result.status == DocumentStatus.FAILED
        assert host.vectors_of(KB, "parts"), "its first batch is still in the vector DB"
        for mode in modes(still_indexing):
            assert "parts" not in await answered_files(harness, question, mode), mode
        harness.host.faults.clear()
        await harness.retrieve(KB, "tea", settings={"search_mode": "vector"})  # a later request removes them
        assert host.vectors_of(KB, "parts") == []
    for mode in MODES:
        assert "parts" not in await answered_files(restarted(host), question, mode), mode


async def test_an_upload_cut_off_by_a_crash_is_never_answered_while_its_vectors_stay(host: FakePlugin):
    kb = test_state_runtime.KB
    harness = Harness(host)
    await harness.ingest(kb, "tea.txt", TEA, document_id="tea")
    crashed = await crash_during_upsert(harness, long_text(400))
    back = restarted(host)
    back.host.fail("vector_delete")  # the restarted plugin cannot remove them yet
    for mode in MODES:
        assert crashed not in await answered_files(back, "How often is component QX-7 inspected?", mode, kb), mode
    assert back.host.vectors_of(kb, crashed)
    back.host.faults.clear()
    await back.retrieve(kb, "tea")
    assert back.host.vectors_of(kb, crashed) == []


async def test_a_dead_process_upload_is_removed_at_once_and_what_lands_later_too(
        host: FakePlugin, monkeypatch: pytest.MonkeyPatch):
    """LangBot finishes a dead process's calls: its cut-off upload's vectors go at the restarted
    plugin's first request, its journal entry stays while a call of the dead process may still
    land, and an upsert landing meanwhile goes too before the entry does."""
    import lucidrag.engine

    kb = test_state_runtime.KB
    harness = Harness(host)
    await harness.ingest(kb, "tea.txt", TEA, document_id="tea")
    crashed = await crash_during_upsert(harness, long_text(400))
    late = host.collections[kb][next(iter(k for k, (_, m) in host.collections[kb].items() if m["file_id"] == crashed))]
    monkeypatch.setattr(lucidrag.engine, "PREVIOUS_PROCESS_LANDING_S", 120.0)
    back = restarted(host)
    await back.retrieve(kb, "tea")
    assert back.host.vectors_of(kb, crashed) == [], "no orphan vector after the restart's first request"
    assert journal_key(kb, crashed) in host.storage

    vector, meta = late
    await back.host.vector_upsert(kb, [vector], [meta["uuid"]], [meta])  # the dead process's last batch lands
    for mode in MODES:
        assert crashed not in await answered_files(back, "How often is component QX-7 inspected?", mode, kb), mode
    state_of(back, kb).previous_writes_until = 0.0  # the dead process's calls can no longer land
    await back.retrieve(kb, "tea")
    assert back.host.vectors_of(kb, crashed) == [] and journal_key(kb, crashed) not in host.storage


# --------------------------------------------------------------------------- deleting
@STILL_INDEXING
@pytest.mark.parametrize("record_deleted", [True, False], ids=["deleted", "record-delete-failed"])
async def test_a_file_deleted_while_a_query_searches_is_not_in_that_querys_answer(
        host: FakePlugin, record_deleted: bool, still_indexing: bool):
    async with a_kb(host, {"solar": SOLAR}, still_indexing) as harness:
        if not record_deleted:  # neither the record's delete nor its journal entry takes
            harness.host.fail("delete_plugin_storage", when=is_record_of("solar"))
            harness.host.fail("set_plugin_storage", when=lambda key, **_: key.endswith("/journal/solar"))
        searched, deleted = asyncio.Event(), asyncio.Event()
        search = harness.host.vector_search  # its results hold the file's vectors
        harness.host.vector_search = answer_held(search, every_call, searched, deleted)  # type: ignore[method-assign]
        for mode in modes(still_indexing) if still_indexing else ("vector", "hybrid"):
            searched.clear(), deleted.clear()
            query = asyncio.ensure_future(
                harness.retrieve(KB, SOLAR_QUESTION, settings={"search_mode": mode, "top_k": 10}))
            await until(searched, query)
            try:
                ok = await harness.component.delete_document(KB, "solar")
            finally:
                deleted.set()
            response = await query
            assert ok is record_deleted  # a failed record delete: LangBot keeps the file, it is deleted again
            if record_deleted:
                assert "solar" not in [entry.metadata["file_id"] for entry in response.results], mode
            else:  # nothing was deleted: the file is whole, in every mode
                assert harness.host.vectors_of(KB, "solar"), mode
        harness.host.vector_search = search  # type: ignore[method-assign]
        harness.host.faults.clear()
        assert await harness.component.delete_document(KB, "solar") is True
    for mode in MODES:
        assert "solar" not in await answered_files(restarted(host), SOLAR_QUESTION, mode), mode


async def answered_when_deleted_meanwhile(harness: Harness, settings: dict[str, Any], reached: asyncio.Event,
                                          release: asyncio.Event) -> list[str]:
    """The files a query for SOLAR_QUESTION answers when "solar" is deleted (and the delete
    succeeds) while the query waits at `reached`, until `release`."""
    query = asyncio.ensure_future(harness.retrieve(KB, SOLAR_QUESTION, settings=settings))
    await until(reached, query)
    try:
        assert await harness.component.delete_document(KB, "solar") is True
    finally:
        release.set()
    return [entry.metadata["file_id"] for entry in (await query).results]


@pytest.mark.parametrize("mode", MODES)
async def test_a_file_deleted_while_a_query_reads_its_record_is_not_in_that_querys_answer(
        host: FakePlugin, mode: str):
    """The delete lands after the query chose its candidates, while it reads their records."""
    async with a_kb(host, {"solar": SOLAR}, still_indexing=False) as harness:
        state_of(harness).records.clear()  # (as if evicted from the cache: read from storage)
        read, release = asyncio.Event(), asyncio.Event()
        harness.host.get_plugin_storage = answer_held(  # type: ignore[method-assign]
            harness.host.get_plugin_storage, once(is_record_of("solar")), read, release)  # the record before the delete
        answered = await answered_when_deleted_meanwhile(harness, {"search_mode": mode, "top_k": 10}, read, release)
        assert "solar" not in answered


@pytest.mark.parametrize("mode", MODES)
async def test_a_file_deleted_while_the_rerank_model_orders_a_query_is_not_in_that_querys_answer(
        host: FakePlugin, mode: str):
    """The delete lands after the query read every record it returns, while the rerank model
    orders them: the last step before the answer still drops the file."""
    async with a_kb(host, {"solar": SOLAR}, still_indexing=False) as harness:
        asked, release = asyncio.Event(), asyncio.Event()
        harness.host.invoke_rerank = held(  # type: ignore[method-assign]
            harness.host.invoke_rerank, every_call, asked, release)
        answered = await answered_when_deleted_meanwhile(
            harness, {"search_mode": mode, "top_k": 10, "rerank_model_uuid": "rr"}, asked, release)
        assert "solar" not in answered


@STILL_INDEXING
async def test_a_file_whose_reupload_fails_while_a_query_searches_is_not_in_that_querys_answer(
        host: FakePlugin, still_indexing: bool):
    """The re-upload fails after removing every vector of the file (FAILED, not DELETED): the hits
    the query found before are no answers."""
    async with a_kb(host, {"solar": SOLAR}, still_indexing) as harness:
        searched, failed = asyncio.Event(), asyncio.Event()
        search = harness.host.vector_search  # its results hold the file's vectors
        harness.host.vector_search = answer_held(search, every_call, searched, failed)  # type: ignore[method-assign]
        query = asyncio.ensure_future(
            harness.retrieve(KB, SOLAR_QUESTION, settings={"search_mode": "vector", "top_k": 10}))
        await until(searched, query)
        harness.host.vector_search = search  # type: ignore[method-assign]
        harness.host.fail("vector_upsert")
        try:
            result = await harness.ingest(KB, "solar.txt", NEW_SOLAR, document_id="solar")
        finally:
            failed.set()
        assert result.status == DocumentStatus.FAILED and host.vectors_of(KB, "solar") == []
        assert "solar" not in [entry.metadata["file_id"] for entry in (await query).results]
        assert state_of(harness).files.state("solar").name == "FAILED"


# --------------------------------------------------------------------------- the keyword index
async def _reupload_held_at_its_vectors(back: Harness, changed: asyncio.Event) -> None:
    release = asyncio.Event()
    back.host.vector_upsert = held(back.host.vector_upsert, lambda *a, **k: True, changed, release)  # type: ignore[method-assign]
    upload = asyncio.ensure_future(back.ingest(KB, "solar.txt", NEW_SOLAR, document_id="solar"))
    back.pending = (upload, release)  # type: ignore[attr-defined]
    await until(changed, upload)


async def _reupload_failing_with_its_vectors_left(back: Harness, changed: asyncio.Event) -> None:
    back.host.fail("vector_upsert")
    back.host.fail("vector_delete")
    result = await back.ingest(KB, "solar.txt", NEW_SOLAR, document_id="solar")
    assert result.status == DocumentStatus.FAILED
    changed.set()


async def _reupload_failing_with_its_vectors_removed(back: Harness, changed: asyncio.Event) -> None:
    back.host.fail("vector_upsert")
    result = await back.ingest(KB, "solar.txt", NEW_SOLAR, document_id="solar")
    assert result.status == DocumentStatus.FAILED
    changed.set()


async def _delete(back: Harness, changed: asyncio.Event) -> None:
    try:
        await back.component.delete_document(KB, "solar")
    finally:
        changed.set()


async def _delete_whose_record_stays(back: Harness, changed: asyncio.Event) -> None:
    back.host.fail("delete_plugin_storage", when=is_record_of("solar"))
    await _delete(back, changed)


@pytest.mark.parametrize("meanwhile", [_reupload_held_at_its_vectors, _reupload_failing_with_its_vectors_left,
                                       _reupload_failing_with_its_vectors_removed, _delete,
                                       _delete_whose_record_stays],
                         ids=["re-uploading", "re-upload-failed", "re-upload-failed-cleanly", "deleted",
                              "record-delete-failed"])
async def test_a_file_that_changes_while_a_restart_indexes_it_is_not_indexed_from_its_old_record(
        harness: Harness, host: FakePlugin, meanwhile: Callable[[Harness, asyncio.Event], Awaitable[None]]):
    await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")
    await harness.ingest(KB, "tea.txt", TEA, document_id="tea")
    del host.storage[index_manifest_key(KB)]  # a restart without a snapshot indexes from the records
    back = restarted(host)
    reading, changed = asyncio.Event(), asyncio.Event()
    read = back.host.get_plugin_storage

    async def slow_read(key: str) -> Any:
        value = await read(key)
        if is_record_of("solar")(key) and not reading.is_set():  # the indexing's read
            reading.set()
            await changed.wait()  # the file changes between reading its record and indexing it
        return value

    back.host.get_plugin_storage = slow_read  # type: ignore[method-assign]

    indexing = asyncio.ensure_future(back.retrieve(KB, "tea"))
    await until(reading, indexing)
    try:
        await meanwhile(back, changed)
    finally:
        changed.set()
    await indexing
    back.host.faults.clear()
    assert "solar" not in state_of(back).index, "the old record was indexed"
    assert "solar" not in await answered_files(back, SOLAR_QUESTION, "keyword")
    pending = getattr(back, "pending", None)
    if pending is not None:  # the re-upload commits: its new text is what is found
        upload, release = pending
        release.set()
        assert (await upload).status == DocumentStatus.COMPLETED
        assert await answered_files(back, "wind turbine 2031", "keyword") == ["solar"]
        assert "solar" not in await answered_files(back, SOLAR_QUESTION, "keyword")


# --------------------------------------------------------------------------- committed
async def test_a_completed_file_whose_record_storage_refused_is_answered_now_and_after_a_restart(
        harness: Harness, host: FakePlugin):
    await harness.ingest(KB, "tea.txt", TEA, document_id="tea")
    host.fail("set_plugin_storage", when=is_record_of("solar"))
    assert (await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")).status == DocumentStatus.COMPLETED
    for mode in MODES:
        assert (await answered_files(harness, SOLAR_QUESTION, mode))[0] == "solar", mode
    host.faults.clear()
    await harness.retrieve(KB, "tea")  # a later request saves the record
    storage_writes = host.calls["set_plugin_storage"]
    await harness.retrieve(KB, "tea")
    assert host.calls["set_plugin_storage"] == storage_writes, "nothing is left to save"
    for mode in MODES:
        assert (await answered_files(restarted(host), SOLAR_QUESTION, mode))[0] == "solar", mode


async def test_a_file_deleted_while_flush_saves_another_files_record_is_not_saved_again(
        harness: Harness, host: FakePlugin):
    """Two records unsaved; while a later request's `flush` saves the first (holding the KB's
    lock), the second file is deleted (its delete waits for the lock). The flush, taking the lock
    again for the second record, finds it deleted meanwhile: it neither saves its record again nor
    makes it committed, so the deleted file is answered by nothing, now or after a restart."""
    await harness.ingest(KB, "tea.txt", TEA, document_id="tea")
    host.fail("set_plugin_storage", when=lambda key, **_: is_record_of("solar")(key) or is_record_of("kettle")(key))
    for file_id, data in (("solar", SOLAR), ("kettle", b"Descale the kettle every month with citric acid.")):
        assert (await harness.ingest(KB, f"{file_id}.txt", data, document_id=file_id)).status == DocumentStatus.COMPLETED
    state = state_of(harness)
    assert list(state.unsaved) == ["solar", "kettle"]
    host.faults.clear()
    saving, release = asyncio.Event(), asyncio.Event()
    host.set_plugin_storage = held(host.set_plugin_storage, once(is_record_of("solar")),  # type: ignore[method-assign]
                                   saving, release)
    flushing = asyncio.ensure_future(harness.component.delete_document(KB, "none"))  # its upkeep flushes
    await until(saving, flushing)
    assert state.lock.locked(), "the first record's save holds the KB's lock"
    deleting = asyncio.ensure_future(harness.component.delete_document(KB, "kettle"))
    for _ in range(1000):  # until the delete waits for the lock
        if state.lock._waiters:  # noqa: SLF001 - the moment this test is about
            break
        await asyncio.sleep(0)
    assert state.lock._waiters and not deleting.done(), "the delete waits for the flush's lock"  # noqa: SLF001
    release.set()
    assert await asyncio.wait_for(deleting, DEADLOCK_S) is True
    await asyncio.wait_for(flushing, DEADLOCK_S)
    # (TOMBSTONED: its refused saves may still land, so its entry waits for the next process)
    assert state.files.state("kettle") is FileState.TOMBSTONED
    assert state.files.state("solar") is FileState.COMMITTED and record_keys_of(host, "solar")
    assert record_keys_of(host, "kettle") == [], "the deleted file's record was not saved again"
    for answering in (harness, restarted(host)):
        for mode in MODES:
            assert "kettle" not in await answered_files(answering, "descale kettle citric acid", mode), mode


def record_keys_of(host: FakePlugin, file_id: str) -> list[str]:
    return [k for k in host.storage if is_record_of(file_id)(k)]


async def upload_that_crashed_before_its_record(harness: Harness, host: FakePlugin) -> None:
    """"tea" committed; "solar" wrote every vector and its journal entry, then the process died
    before its record was saved."""
    from lucidrag.state.store import JournalEntry, KbStore

    await harness.ingest(KB, "tea.txt", TEA, document_id="tea")
    solar = await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")
    for key in [k for k in host.storage if is_record_of("solar")(k)]:
        del host.storage[key]
    await harness.invoke(KbStore(host, KB).write_journal, JournalEntry("solar", solar.chunks_created))


async def test_an_upload_that_wrote_every_vector_before_a_crash_is_answered_after_the_restart(
        harness: Harness, host: FakePlugin):
    await upload_that_crashed_before_its_record(harness, host)
    back = restarted(host)
    await back.retrieve(KB, "tea")  # the restart adopts the complete upload
    for mode in MODES:
        assert (await answered_files(back, SOLAR_QUESTION, mode))[0] == "solar", mode


async def test_a_deleted_file_leaves_nothing_to_retry(harness: Harness, host: FakePlugin):
    await harness.ingest(KB, "tea.txt", TEA, document_id="tea")
    await harness.ingest(KB, "kettle.txt", b"Descale the kettle every month.", document_id="kettle")
    assert await harness.component.delete_document(KB, "kettle") is True
    deletes = host.calls["delete_plugin_storage"]
    await harness.retrieve(KB, "tea")
    assert host.calls["delete_plugin_storage"] == deletes, "a deletion that succeeded is not repeated"
    await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")
    host.fail("delete_plugin_storage", when=is_record_of("solar"))
    host.fail("set_plugin_storage", when=lambda key, **_: key.endswith("/journal/solar"))  # no tombstone either
    assert await harness.component.delete_document(KB, "solar") is False
    host.faults.clear()
    await harness.retrieve(KB, "tea")  # a later request deletes the record
    deletes = host.calls["delete_plugin_storage"]
    await harness.retrieve(KB, "tea")
    assert host.calls["delete_plugin_storage"] == deletes, "nothing is left to delete"
    assert await harness.component.delete_document(KB, "solar") is True


async def test_a_delete_whose_vector_delete_lost_its_answer_is_answered_by_nothing(harness: Harness, host: FakePlugin):
    """LangBot deleted the vectors but the answer was lost: the delete fails (LangBot keeps the
    file), and the file is no answer by keyword either, now or after a restart."""
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    real = host.vector_delete

    async def lost(*args: Any, **kwargs: Any) -> int:
        await real(*args, **kwargs)
        raise ActionCallTimeoutError("vector_delete: the action call timed out")

    host.vector_delete = lost  # type: ignore[method-assign]
    assert await harness.component.delete_document(KB, solar.document_id) is False
    host.vector_delete = real  # type: ignore[method-assign]
    for mode in MODES:
        assert solar.document_id not in await answered_files(harness, SOLAR_QUESTION, mode), mode
    back = restarted(host)
    for mode in MODES:
        assert solar.document_id not in await answered_files(back, SOLAR_QUESTION, mode), mode



# --------------------------------------------------------------------------- the table names every state
@pytest.mark.usefixtures("persist_every_segment")
async def test_the_table_names_every_files_state_and_knows_no_state_only_for_a_file_it_never_saw(
        harness: Harness, host: FakePlugin):
    await harness.ingest(KB, "tea.txt", TEA, document_id="tea")
    await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")
    assert await harness.component.delete_document(KB, "solar") is True
    host.fail("vector_upsert")
    assert (await harness.ingest(KB, "parts.txt", long_text(3), document_id="parts")).status == DocumentStatus.FAILED
    host.faults.clear()
    files = state_of(harness).files
    assert [files.state(f) for f in ("tea", "solar", "parts", "never")] == [
        FileState.COMMITTED, FileState.DELETED, FileState.FAILED, None]
    assert files.record_stored("tea") and not files.record_stored("solar")
    back = restarted(host)
    await back.retrieve(KB, "tea")
    assert state_of(back).files.state("tea") is FileState.COMMITTED and state_of(back).files.record_stored("tea")
    assert state_of(back).files.state("solar") is None, "a new process never saw it"
    unlisted = restarted(host)
    unlisted.host.fail("get_plugin_storage_keys")
    await unlisted.retrieve(KB, "tea")
    assert state_of(unlisted).files.state("tea") is FileState.COMMITTED, "the index snapshot names it"


def _record_and_vectors_unreadable(harness: Harness, file_id: str) -> None:
    harness.host.fail("get_plugin_storage", when=is_record_of(file_id))
    harness.host.fail("vector_list", when=lambda filters=None, **_: bool(filters))  # nor rebuilt from its vectors


@pytest.mark.usefixtures("persist_every_segment")
@pytest.mark.parametrize("restart", ["same-process", "restart-without-listing"])
async def test_a_completed_file_whose_record_cannot_be_read_is_answered_from_its_vectors(
        harness: Harness, host: FakePlugin, restart: str):
    """A COMMITTED file's vector hits are answers with their text even while its record cannot be
    read (the hit's metadata carries it): the file's state says it committed, in the process that
    uploaded it and in one that learnt it from the index snapshot alone."""
    await harness.ingest(KB, "tea.txt", TEA, document_id="tea")
    await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")
    asking = harness
    if restart == "same-process":
        state_of(harness).records.clear()
    else:
        asking = restarted(host)
        asking.host.fail("get_plugin_storage_keys")
        await asking.retrieve(KB, "tea", settings={"search_mode": "keyword"})  # loaded; no listing
    _record_and_vectors_unreadable(asking, "solar")
    response = await asking.retrieve(KB, SOLAR_QUESTION, settings={"search_mode": "vector", "top_k": 10})
    solar = [e for e in response.results if e.metadata["file_id"] == "solar"]
    assert solar and "42 kilowatts" in solar[0].content[0].text


async def test_uploading_a_committed_file_again_asks_storage_nothing_about_it(host: FakePlugin):
    """A file this process committed may have vectors: its re-upload deletes them first without
    listing storage (which here fails: the listing would not tell)."""
    harness = Harness(host)
    await harness.ingest(KB, "tea.txt", TEA, document_id="tea")
    back = restarted(host)
    back.host.fail("get_plugin_storage_keys")
    parts = await back.ingest(KB, "parts.txt", long_text(40), document_id="parts",
                              settings={"chunk_size": 128, "chunk_overlap": 0})
    assert parts.status == DocumentStatus.COMPLETED and len(host.vectors_of(KB, "parts")) > 1
    listings = back.host.calls["get_plugin_storage_keys"]
    await back.retrieve(KB, "tea")
    per_request = back.host.calls["get_plugin_storage_keys"] - listings  # the installation's own, until one works
    listings += per_request
    again = await back.ingest(KB, "parts.txt", long_text(1), document_id="parts",
                              settings={"chunk_size": 128, "chunk_overlap": 0})
    assert again.status == DocumentStatus.COMPLETED
    assert back.host.calls["get_plugin_storage_keys"] == listings + per_request
    assert len(host.vectors_of(KB, "parts")) == 1, "the earlier version's chunks went first"


async def test_a_file_whose_deletion_a_later_request_finished_is_new_to_its_next_upload(
        harness: Harness, host: FakePlugin):
    await harness.ingest(KB, "tea.txt", TEA, document_id="tea")
    await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")
    host.fail("delete_plugin_storage", when=is_record_of("solar"))
    assert await harness.component.delete_document(KB, "solar") is True  # its tombstone is durable
    assert state_of(harness).files.state("solar") is FileState.DELETING
    host.faults.clear()
    await harness.retrieve(KB, "tea")  # a later request deletes the record
    assert state_of(harness).files.state("solar") is FileState.DELETED
    deletes = host.calls["vector_delete"]
    assert (await harness.ingest(KB, "solar.txt", NEW_SOLAR, document_id="solar")).status == DocumentStatus.COMPLETED
    assert host.calls["vector_delete"] == deletes, "nothing of it is left to delete first"


@pytest.mark.parametrize("storage_failed", [False, True], ids=["deleted", "deletion-finished-later"])
async def test_a_late_write_left_to_the_next_process_does_not_follow_the_files_next_upload(
        host: FakePlugin, storage_failed: bool):
    """An upsert of the file lost its answer, and its deletion left the journal entry "0 chunks" to
    the next process (TOMBSTONED; at once, or once a later request could delete the record).
    Uploaded again and deleted again, nothing of it may land any more: the deletion is complete,
    no entry is left."""
    harness = Harness(host)
    await harness.ingest(KB, "tea.txt", TEA, document_id="tea")
    landings = answer_lost_once(host, "solar")
    assert (await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")).status == DocumentStatus.COMPLETED
    if storage_failed:  # the entry does not take (the record's delete does)
        host.fail("set_plugin_storage", when=lambda key, **_: key == journal_key(KB, "solar"))
    assert await harness.component.delete_document(KB, "solar") is True
    if storage_failed:
        assert state_of(harness).files.state("solar") is FileState.DELETING
        host.faults.clear()
        await harness.retrieve(KB, "tea")  # a later request writes the entry
    assert state_of(harness).files.state("solar") is FileState.TOMBSTONED
    await landings[0]()
    assert (await harness.ingest(KB, "solar.txt", NEW_SOLAR, document_id="solar")).status == DocumentStatus.COMPLETED
    assert await harness.component.delete_document(KB, "solar") is True
    assert state_of(harness).files.state("solar") is FileState.DELETED
    assert journal_key(KB, "solar") not in host.storage


@pytest.mark.usefixtures("persist_every_segment")
async def test_an_adopted_upload_whose_journal_entry_outlived_the_index_write_loses_it_later(
        harness: Harness, host: FakePlugin):
    """A restart adopts an upload that wrote every vector before a crash; the index snapshot's write
    fails, so its journal entry stays (the snapshot does not name it yet), and goes once a later
    request writes the snapshot."""
    await upload_that_crashed_before_its_record(harness, host)
    back = restarted(host)
    back.host.fail("set_plugin_storage", when=lambda key, **_: "/kw/" in key)
    await back.retrieve(KB, "tea")  # adopted: its record is saved, the snapshot is not
    assert state_of(back).files.state("solar") is FileState.COMMITTED
    assert journal_key(KB, "solar") in host.storage
    back.host.faults.clear()
    await back.retrieve(KB, "tea")
    assert journal_key(KB, "solar") not in host.storage
    assert not state_of(back).needs_upkeep()


def completeness_reads(harness: Harness) -> list[int]:
    """Counts the vector DB reads of chunk-0 vectors by id (whether files' vectors are complete)."""
    reads, real = [0], harness.host.vector_list

    async def vector_list(*args: Any, filters: Any = None, **kwargs: Any) -> Any:
        if filters and "uuid" in filters:
            reads[0] += 1
        return await real(*args, filters=filters, **kwargs)

    harness.host.vector_list = vector_list  # type: ignore[method-assign]
    return reads


async def test_a_file_whose_complete_vectors_this_process_knows_is_read_without_asking_the_vector_db(
        host: FakePlugin):
    """A stored record is an answer only while its file's chunk-0 vector is stored; a file this
    process committed, or found complete once, is not asked about again."""
    harness = Harness(host)
    await harness.ingest(KB, "tea.txt", TEA, document_id="tea")
    await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")
    reads = completeness_reads(harness)
    state_of(harness).records.clear()
    assert (await answered_files(harness, SOLAR_QUESTION, "keyword"))[0] == "solar"
    assert reads == [0], "committed here: its vectors are complete"
    back = restarted(host)
    reads = completeness_reads(back)
    assert (await answered_files(back, SOLAR_QUESTION, "keyword"))[0] == "solar"
    assert reads[0] > 0, "a restarted process asks"
    state_of(back).records.clear()
    asked = reads[0]
    assert (await answered_files(back, SOLAR_QUESTION, "keyword"))[0] == "solar"
    assert reads[0] == asked, "found complete: not asked again"
