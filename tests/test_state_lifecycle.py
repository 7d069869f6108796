"""The KB state leaves nothing behind: a deleted file is gone from the index, the record cache,
plugin storage and every retry list, also when storage failed on the way; a failed ingest leaves
no journal, no vectors and nothing "in flight"; the repair rebuilds from the vector DB, not from
stale records; vector hits without a record are still returned with their citation.

Written against the survivors of a mutation run (docs/TESTING.md): each test fails when one line
of lucidrag/state/kbstate.py is changed the way a survivor changed it.
"""

from __future__ import annotations

import asyncio
import math

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

import lucidrag.engine as engine_module
import lucidrag.state.kbload as kbload_module
import lucidrag.state.repairstate as repairstate
from lucidrag.state.kbstate import KnowledgeBaseState
from lucidrag.state.lifecycle import FileState
from lucidrag.state.records import (
    PROBE_FILE_ID,
    ChunkRecord,
    chunk_uuid,
    probe_vector_metadata,
    sweep_note_metadata,
    tombstone_vector_id,
    tombstone_vector_metadata,
)
from lucidrag.state.storage_keys import file_record_key, index_segment_key, journal_key, meta_key
from lucidrag.state.store import JournalEntry, KbMeta, KbStore, list_keys
from tests.conftest import FakePlugin, Harness
from tests.fakes import DIM, ActionCallTimeoutError, hash_embed, on_call
from tests.test_state_runtime import long_text, restarted

KB = "kb-life"
TEA = b"Oolong tea is partially oxidised. The Tieguanyin cultivar comes from Anxi in Fujian."
SOLAR = b"The solar array on building C produces 42 kilowatts at noon in June."
KEYWORD = {"search_mode": "keyword"}


def state_of(harness: Harness, kb: str = KB) -> KnowledgeBaseState:
    return harness.host.engine.installation("dedicated").kb(kb)


def record_keys(host: FakePlugin, file_id: str) -> list[str]:
    return [k for k in host.storage if k.startswith(file_record_key(KB, file_id))]


# ---------------------------------------------------------------- deleting a file
async def test_a_deleted_file_leaves_no_trace_in_the_state(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    state = state_of(harness)
    assert state.records.get(solar.document_id) is not None
    assert await harness.component.delete_document(KB, solar.document_id)
    assert state.records.get(solar.document_id) is None, "the record cache still holds the deleted file"
    assert solar.document_id not in state.known_files()
    assert not state.files.record_stored(solar.document_id)
    assert record_keys(host, solar.document_id) == []
    assert not state.needs_upkeep()


async def test_a_file_deleted_while_its_record_was_unsaved_does_not_come_back(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("set_plugin_storage", when=lambda key, **_: "/file/" in key)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    assert solar.status == DocumentStatus.COMPLETED and not record_keys(host, solar.document_id)
    assert await harness.component.delete_document(KB, solar.document_id)
    host.faults.clear()
    await harness.retrieve(KB, "anything")  # retries what failed earlier
    assert record_keys(host, solar.document_id) == [], "the deleted file's record was saved after all"
    assert await restarted(host).texts(KB, "solar array kilowatts", settings=KEYWORD) == []


async def test_a_delete_that_storage_cannot_record_deletes_nothing_and_a_retry_does_it(harness: Harness, host):
    """Storage refuses both the record's delete and the journal entry: the delete answers False
    before any vector goes, so the file stays whole (not answered by keyword alone, after a
    restart, as when its vectors went first), and LangBot's retry deletes it."""
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("delete_plugin_storage", when=lambda key, **_: "/file/" in key)
    host.fail("set_plugin_storage", when=lambda key, **_: "/journal/" in key)
    assert not await harness.component.delete_document(KB, solar.document_id), "nothing durable says it is gone"
    assert record_keys(host, solar.document_id) and host.vectors_of(KB, solar.document_id), "nothing was deleted"
    for mode in ("keyword", "vector"):
        assert [t for t in await harness.texts(KB, "solar array kilowatts", settings={"search_mode": mode})
                if "42 kilowatts" in t], f"the file is whole ({mode})"
    host.faults.clear()
    assert await harness.component.delete_document(KB, solar.document_id), "LangBot's retry"
    assert record_keys(host, solar.document_id) == [] and host.vectors_of(KB, solar.document_id) == []
    assert not state_of(harness).needs_upkeep()
    assert await restarted(host).texts(KB, "solar array kilowatts", settings=KEYWORD) == []


async def test_re_uploading_a_deleted_document_id_does_not_delete_vectors_first(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    assert await harness.component.delete_document(KB, solar.document_id)
    before = host.calls["vector_delete"]
    again = await harness.ingest(KB, "solar.txt", SOLAR, document_id=solar.document_id)
    assert again.status == DocumentStatus.COMPLETED
    assert host.calls["vector_delete"] == before, "the file is known to be gone: no delete round trip"


async def test_a_file_deleted_before_the_restart_indexed_it_is_never_indexed(harness: Harness, host, monkeypatch):
    files = [await harness.ingest(KB, f"f{i}.txt", f"Gadget G{i} is stored in bay {i}.".encode())
             for i in range(3)]
    for key in [k for k in host.storage if "/kw/" in k]:
        del host.storage[key]  # no snapshot: the files wait in `to_index`
    monkeypatch.setattr(kbload_module, "FIRST_LOAD_BUDGET_S", 0.0)
    back = restarted(host)
    state = state_of(back)
    await state.ensure_loaded(back.host, KB)
    assert files[0].document_id in state.to_index
    listed: list[dict] = []
    back.host.fail("vector_list", when=lambda filters=None, **_: listed.append(filters or {}) and False)
    await back.component.delete_document(KB, files[0].document_id)
    assert files[0].document_id not in state.known_files()
    assert not [f for f in listed if f.get("file_id") == files[0].document_id], "nothing left to index of it"
    monkeypatch.setattr(kbload_module, "FIRST_LOAD_BUDGET_S", 60.0)
    assert await back.texts(KB, "gadget bay", settings={**KEYWORD, "top_k": 10})
    assert state.index.file_ids() == {f.document_id for f in files[1:]}


# ---------------------------------------------------------------- failed ingests
async def test_a_failed_ingest_leaves_nothing_in_flight_and_no_journal(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("vector_upsert")
    failed = await harness.ingest(KB, "solar.txt", SOLAR)
    assert failed.status == DocumentStatus.FAILED
    state = state_of(harness)
    assert state.in_flight == set() and state.journals == set() and not state.files.unjournalled()
    assert state.files.state(failed.document_id) is FileState.FAILED, "its vectors are gone: nothing to settle"
    assert failed.document_id in state.unsettled, "a FAILED file is never an answer"
    assert journal_key(KB, failed.document_id) not in host.storage
    assert not state.needs_upkeep()
    host.faults.clear()
    retried = await harness.ingest(KB, "solar.txt", SOLAR, document_id=failed.document_id)
    assert retried.status == DocumentStatus.COMPLETED
    assert "42 kilowatts" in (await harness.texts(KB, "solar array kilowatts", settings=KEYWORD))[0]


async def test_vectors_a_failed_ingest_could_not_remove_are_removed_by_a_later_request(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("vector_upsert", when=on_call(2), error=RuntimeError("vector DB went away"))
    host.fail("vector_delete")
    failed = await harness.ingest(KB, "parts.txt", b"\n\n".join(
        f"Part {i} of the pump is checked weekly.".encode() for i in range(300)), settings={"chunk_size": 64, "chunk_overlap": 0})
    assert failed.status == DocumentStatus.FAILED
    assert host.vectors_of(KB, failed.document_id), "the first batch could not be rolled back"
    assert journal_key(KB, failed.document_id) in host.storage
    host.faults.clear()
    await harness.retrieve(KB, "anything")
    assert host.vectors_of(KB, failed.document_id) == []
    assert journal_key(KB, failed.document_id) not in host.storage
    assert not state_of(harness).needs_upkeep()


async def test_reconcile_removes_an_aborted_file_under_the_kbs_lock_after_its_entry(harness: Harness, host):
    """`reconcile`'s removal of an ABORTED file's vectors is sent under the KB's lock (an upload of
    the same id begins under it: the removal must not land after that upload's vectors) and once
    the file's entry "0 chunks" is stored (a restart knows of the removal if this process dies
    with it in flight)."""
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("vector_upsert", when=on_call(2), error=RuntimeError("vector DB went away"))
    host.fail("vector_delete")
    failed = await harness.ingest(KB, "parts.txt", b"\n\n".join(
        f"Part {i} of the pump is checked weekly.".encode() for i in range(300)), settings={"chunk_size": 64, "chunk_overlap": 0})
    assert state_of(harness).files.state(failed.document_id) is FileState.ABORTED
    host.faults.clear()
    real_delete, seen = host.vector_delete, []

    async def delete(*args: object, **kwargs: object) -> int:
        if kwargs.get("file_ids") == [failed.document_id]:
            seen.append((state_of(harness).lock.locked(), journal_key(KB, failed.document_id) in host.storage))
        return await real_delete(*args, **kwargs)

    host.vector_delete = delete  # type: ignore[method-assign]
    await harness.retrieve(KB, "anything")
    assert seen == [(True, True)]
    assert host.vectors_of(KB, failed.document_id) == []


STORAGE_CALLS = ("set_plugin_storage", "delete_plugin_storage", "get_plugin_storage", "get_plugin_storage_keys")


async def test_a_failed_re_upload_whose_removal_both_stores_refuse_leaves_a_tombstone(harness: Harness, host):
    """Plugin storage refuses every call and the vector DB refuses the delete of the earlier
    version of a re-upload that failed: the file's tombstone in the vector DB makes a restart
    remove that version instead of answering its record."""
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    await harness.ingest(KB, "tea.txt", TEA)
    for method in (*STORAGE_CALLS, "vector_delete"):
        host.fail(method)
    failed = await harness.ingest(KB, "solar.txt", b"", document_id=solar.document_id)
    assert failed.status == DocumentStatus.FAILED
    assert tombstone_vector_id(solar.document_id) in {m["uuid"] for m in host.vectors_of(KB, solar.document_id)}
    host.faults.clear()
    back = restarted(host)
    for mode in ("keyword", "vector", "hybrid"):
        texts = await back.texts(KB, "solar array kilowatts", settings={"search_mode": mode})
        assert not [t for t in texts if "42 kilowatts" in t], f"the failed file's earlier version answered ({mode})"
    await back.retrieve(KB, "anything")  # upkeep
    assert host.vectors_of(KB, solar.document_id) == [] and record_keys(host, solar.document_id) == []
    assert "Tieguanyin" in (await back.texts(KB, "oolong tea cultivar", settings=KEYWORD))[0]


@pytest.mark.parametrize("backend", ["chroma", "milvus"])
async def test_vectors_of_a_failed_new_file_nothing_names_are_swept_by_the_next_process(backend: str):
    """Plugin storage refuses everything and the vector DB refuses the removal of a failed
    upload's possible earlier version: its probe and tombstone are all the file has, and nothing
    names it once the process dies before its `reconcile` (seeds 262, 5722). The removal leaves a
    sweep note naming the file under PROBE_FILE_ID, which the next process finds and sweeps,
    the file's vectors with it, also where the backend keeps only text, file id and uuid."""
    host = FakePlugin.milvus() if backend == "milvus" else FakePlugin()
    await Harness(host).ingest(KB, "tea.txt", TEA)
    back = restarted(host)  # its storage refuses everything from the start: the meta unread
    for method in (*STORAGE_CALLS, "vector_delete"):
        back.host.fail(method)
    failed = await back.ingest(KB, "new.txt", b"", document_id="new-file")
    assert failed.status == DocumentStatus.FAILED
    assert tombstone_vector_id("new-file") in {m["uuid"] for m in host.vectors_of(KB, "new-file")}
    later = restarted(host)  # the failing process died; the previous one's calls can no longer land
    await later.retrieve(KB, "anything")
    assert host.vectors_of(KB, "new-file") == [], "the failed file's vectors stayed"
    assert host.vectors_of(KB, PROBE_FILE_ID) == [], "the sweep note stayed"
    assert "Tieguanyin" in (await later.texts(KB, "oolong tea cultivar", settings=KEYWORD))[0]


async def test_a_query_probing_the_collection_keeps_the_sweep_notes_a_dead_process_left():
    """As above on a KB whose files were all deleted: the next process finds no record, and cannot
    read the meta at first, so whether the collection exists is unknown and its first query probes
    it with one vector under PROBE_FILE_ID, deleted again by file id. That delete took the dead
    process's sweep notes with it, and the failed file's vectors stayed for good. Now notes found
    there stay, with the probe, for the sweep."""
    host = FakePlugin.milvus()
    harness = Harness(host)
    await harness.ingest(KB, "tea.txt", TEA, document_id="tea")
    assert await harness.component.delete_document(KB, "tea") is True
    back = restarted(host)
    for method in (*STORAGE_CALLS, "vector_delete"):
        back.host.fail(method)
    assert (await back.ingest(KB, "new.txt", b"", document_id="new-file")).status == DocumentStatus.FAILED
    assert host.vectors_of(KB, PROBE_FILE_ID), "no sweep note"
    later = restarted(host)
    later.host.fail("get_plugin_storage")  # the meta unread
    await later.retrieve(KB, "anything")
    assert not state_of(later).fresh, "the query did not probe the collection"
    later.host.faults.clear()
    await later.retrieve(KB, "anything")
    assert host.vectors_of(KB, "new-file") == [], "the failed file's vectors stayed"
    assert host.vectors_of(KB, PROBE_FILE_ID) == []


async def test_a_query_probe_left_for_the_sweep_marks_a_kb_that_never_had_a_vector(monkeypatch):
    """A KB where no file ever completed: its stored meta says "never had a vector", so no process
    touches its collection. A process that cannot read that meta probes the collection with its
    first query, and where the listing for sweep notes beside the probe fails, the probe stays for
    the sweep, due once the previous process's calls can no longer land. A process replaced before
    then left it for good: the next one read "never had a vector" and never looked (seeds 1992,
    4702). Now the KB is marked "has had vectors", and the next process sweeps the probe."""
    host = FakePlugin.milvus()
    await Harness(host).create(KB)
    monkeypatch.setattr(engine_module, "PREVIOUS_PROCESS_LANDING_S", 120.0)  # the sweep is not due
    back = restarted(host)
    back.host.fail("get_plugin_storage", when=lambda key, **_: key == meta_key(KB))  # the meta unread
    back.host.fail("vector_list")  # the listing for notes beside the probe
    await back.retrieve(KB, "anything")
    assert not state_of(back).fresh, "the query did not probe the collection"
    assert host.vectors_of(KB, PROBE_FILE_ID), "the probe stays for the sweep"
    back.host.faults.clear()
    await back.retrieve(KB, "anything")  # upkeep (the sweep not due yet)
    assert host.vectors_of(KB, PROBE_FILE_ID)
    monkeypatch.setattr(engine_module, "PREVIOUS_PROCESS_LANDING_S", 0.0)
    later = restarted(host)
    for _ in range(2):
        await later.retrieve(KB, "anything")
    assert host.vectors_of(KB, PROBE_FILE_ID) == [], "the probe stayed: the KB's meta says it never had a vector"


async def test_a_delete_that_cannot_read_a_dead_process_entry_keeps_the_dimension_its_removal_needs():
    """A KB that never had a vector (its collection may be missing): a dead process's failed
    upload left its removal's probe (one vector under the file's id) and its entry "0 chunks"
    with the probe's dimension, which that removal needs. A delete of the file whose read of the
    entry failed rewrote it "0 chunks" without the dimension, so its removal found none to
    re-create the collection with, did nothing, and the probe stayed for good (seed 3138). Now such
    a delete changes nothing (the file is deleted again), and the probe goes."""
    host = FakePlugin.milvus()
    harness = Harness(host)
    await harness.create(KB)
    await harness.invoke(KbStore(host, KB).write_journal, JournalEntry("doc", 0, DIM))
    probe = probe_vector_metadata("doc")
    await harness.invoke(host.vector_upsert, KB, [[1.0] + [0.0] * (DIM - 1)], [probe["uuid"]], [probe],
                         [probe["text"]])
    back = restarted(host)
    reads = iter(range(1_000))
    back.host.fail("get_plugin_storage", when=lambda key, **_: key == journal_key(KB, "doc") and next(reads) == 0)
    if await back.component.delete_document(KB, "doc") is not True:
        assert await back.component.delete_document(KB, "doc") is True
    assert host.vectors_of(KB, "doc") == [], "the removal's probe stayed"
    assert journal_key(KB, "doc") not in host.storage


async def test_a_failed_removal_of_a_first_write_keeps_its_dimension_for_the_next_one():
    """A KB that never had a vector, a restart, storage refusing everything and the vector DB
    every delete: a failed upload's removal of what its id may have left upserted its probe (one
    vector of the model's dimension under the file's id) and could not delete it, nor write the
    file's tombstone. That removal forgot the dimension, so the next one (`reconcile`, once storage answers) had nothing to
    re-create the collection with and the probe stayed for good. Now the file keeps it."""
    host = FakePlugin.milvus()
    await Harness(host).create(KB)
    back = restarted(host)
    for method in (*STORAGE_CALLS, "vector_delete"):
        back.host.fail(method)
    back.host.fail("vector_upsert", when=lambda ids, **_: tombstone_vector_id("gone") in ids)
    assert (await back.ingest(KB, "new.txt", b"", document_id="gone")).status == DocumentStatus.FAILED
    assert host.vectors_of(KB, "gone"), "no removal's probe"
    back.host.faults.clear()
    for _ in range(2):
        await back.retrieve(KB, "anything")  # upkeep: `reconcile`
    assert host.vectors_of(KB, "gone") == [], "the removal's probe stayed"


async def test_a_dead_process_query_probe_entry_leaves_the_sweep_notes_beside_it_to_the_sweep():
    """A dead process's query probe (its journal entry under PROBE_FILE_ID) on a KB whose
    collection also holds a sweep note naming a failed file beside that file's tombstone: the
    next process's `reconcile` deleted PROBE_FILE_ID's vectors by file id, the note with them, and
    the failed file's tombstone was named by nothing. Now the sweep removes the noted file first."""
    host = FakePlugin.milvus()
    harness = Harness(host)
    await harness.ingest(KB, "tea.txt", TEA, document_id="tea")
    await harness.invoke(KbStore(host, KB).write_journal, JournalEntry(PROBE_FILE_ID, 0, DIM))
    markers = [tombstone_vector_metadata("ghost"), sweep_note_metadata("ghost"), probe_vector_metadata(PROBE_FILE_ID)]
    await harness.invoke(host.vector_upsert, KB, [[1.0] + [0.0] * (DIM - 1)] * 3, [m["uuid"] for m in markers],
                         markers, [m["text"] for m in markers])
    back = restarted(host)
    for _ in range(3):
        await back.retrieve(KB, "anything")
    assert host.vectors_of(KB, "ghost") == [], "the failed file's tombstone stayed, its note deleted"
    assert host.vectors_of(KB, PROBE_FILE_ID) == []
    assert journal_key(KB, PROBE_FILE_ID) not in host.storage


async def test_a_sweep_note_of_a_file_uploaded_again_since_goes_and_leaves_the_upload(host):
    """A file whose failed upload left a sweep note is uploaded again and COMPLETES while storage
    refuses its record (UNSAVED: an answer): the sweep drops the note and keeps the new upload's
    vectors, rather than waiting for a record save that may never come."""
    await Harness(host).ingest(KB, "tea.txt", TEA)
    back = restarted(host)
    for method in ("set_plugin_storage", "delete_plugin_storage", "get_plugin_storage_keys", "vector_delete"):
        back.host.fail(method)  # (the meta is read: no query probes the collection, which deletes notes)
    assert (await back.ingest(KB, "new.txt", b"", document_id="solar")).status == DocumentStatus.FAILED
    assert host.vectors_of(KB, PROBE_FILE_ID), "a sweep note names the failed file"
    back.host.faults.clear()
    back.host.fail("set_plugin_storage", when=lambda key, **_: "/file/" in key)  # its record is refused
    assert (await back.ingest(KB, "solar.txt", SOLAR, document_id="solar")).status == DocumentStatus.COMPLETED
    assert state_of(back).files.state("solar") is FileState.UNSAVED
    state_of(back).probe_sweep_at = 0.0  # the note's and the failed upload's writes can no longer land
    await back.retrieve(KB, "anything")  # upkeep: the sweep
    assert host.vectors_of(KB, PROBE_FILE_ID) == [], "the note waits for the record's save"
    assert "42 kilowatts" in (await back.texts(KB, "solar array kilowatts", settings={"search_mode": "vector"}))[0]


async def test_probe_vectors_nothing_named_are_swept_once_earlier_calls_landed(host, monkeypatch):
    """A removal's probe that nothing durable names goes under PROBE_FILE_ID; a process that died
    may have left one there (or it landed late): every process deletes PROBE_FILE_ID's vectors
    once the previous process's calls can no longer land."""
    harness = Harness(host)
    await harness.ingest(KB, "tea.txt", TEA)
    probe = probe_vector_metadata(PROBE_FILE_ID)
    await harness.invoke(host.vector_upsert, KB, [[1.0] + [0.0] * (DIM - 1)], [probe["uuid"]], [probe],
                         [probe["text"]])
    monkeypatch.setattr(engine_module, "PREVIOUS_PROCESS_LANDING_S", 120.0)
    back = restarted(host)
    await back.retrieve(KB, "anything")
    assert host.vectors_of(KB, PROBE_FILE_ID), "not before the previous process's calls may have landed"
    monkeypatch.setattr(engine_module, "PREVIOUS_PROCESS_LANDING_S", 0.0)
    later = restarted(host)
    await later.retrieve(KB, "anything")
    assert host.vectors_of(KB, PROBE_FILE_ID) == []
    assert "Tieguanyin" in (await later.texts(KB, "oolong tea cultivar", settings=KEYWORD))[0]


async def test_reconcile_settles_every_journal_entry_even_after_one_that_is_already_gone(host):
    harness = Harness(host)
    crashed = await harness.ingest(KB, "solar.txt", SOLAR)
    await harness.ingest(KB, "tea.txt", TEA)
    store = KbStore(host, KB)
    await harness.invoke(store.write_journal, JournalEntry(crashed.document_id, 99))  # never committed
    state = state_of(harness)
    for file_id in ("0", crashed.document_id):  # as a restart's listing finds them (sorted: "0" is gone)
        state.files.move(file_id, FileState.JOURNALLED)
    await harness.invoke(state.reconcile, host, KB, math.inf)
    assert host.vectors_of(KB, crashed.document_id) == [], "the crashed ingest's vectors were removed"
    assert state.journals == set()


BACKENDS = {"chroma": FakePlugin, "milvus": FakePlugin.milvus, "pgvector": FakePlugin.pgvector}


def answers_lost(host: FakePlugin, method: str = "vector_upsert", written: bool = True) -> None:
    """Every `method` call times out in the SDK: after the host did it (`written`), or before it
    got there. LangBot's runtime goes on with a call whose answer the plugin gave up on."""
    real = getattr(host, method)

    async def lost(*args, **kwargs):
        if written:
            await real(*args, **kwargs)
        raise ActionCallTimeoutError(f"{method} timed out")

    setattr(host, method, lost)


def answers_back(host: FakePlugin, method: str = "vector_upsert") -> None:
    host.__dict__.pop(method, None)


async def no_entry_after_a_restart(host: FakePlugin) -> None:
    """No journal entry is left once the next process settled: the entry of a file whose upsert
    went unanswered stays until then, since LangBot may still finish that upsert."""
    back = restarted(host)
    for _ in range(2):
        await back.retrieve(KB, "anything")
    assert not [k for k in host.storage if "/journal/" in k]


async def a_failed_first_upload(host: FakePlugin, restart: bool, written: bool = True) -> tuple[Harness, str]:
    """A new KB whose first upload FAILED because the upsert's answer was lost (after LangBot wrote
    it, or before it got there); answers come back, then the process restarts or goes on. Returns
    the process to settle it in and the failed file's id."""
    harness = Harness(host)
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    answers_lost(host, written=written)
    failed = await harness.ingest(KB, "solar.txt", SOLAR)
    assert failed.status == DocumentStatus.FAILED
    answers_back(host)
    return (restarted(host) if restart else harness), failed.document_id


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("restart", [False, True], ids=["same-process", "after-a-restart"])
async def test_a_new_kbs_first_upsert_that_wrote_but_lost_its_answer_leaves_no_vector(backend: str, restart: bool):
    """The first file of a KB that never had a vector: LangBot wrote its vectors, the answer was
    lost, the file FAILED. Once things settle, none of its vectors may stay (nothing answers them,
    nothing else would ever remove them), and Milvus' collection keeps the model's dimension."""
    host = BACKENDS[backend]()
    settled, failed_id = await a_failed_first_upload(host, restart)
    for _ in range(2):
        await settled.retrieve(KB, "anything")
    assert host.vectors_of(KB, failed_id) == [], "the failed file's vectors leaked"
    await no_entry_after_a_restart(host)
    assert host.dims.get(KB) in (None, DIM)
    tea = await settled.ingest(KB, "tea.txt", TEA)
    assert tea.status == DocumentStatus.COMPLETED, tea.error_message
    assert "Tieguanyin" in (await settled.texts(KB, "Which cultivar comes from Anxi?"))[0]
    assert {m["file_id"] for m in host.vectors_of(KB)} == {tea.document_id}


@pytest.mark.parametrize("restart", [False, True], ids=["same-process", "after-a-restart"])
async def test_deleting_such_a_failed_file_at_once_removes_its_vectors(restart: bool):
    """The operator deletes the FAILED file before anything settled it (the vector DB kept
    losing answers during the ingest, so nothing could be removed then)."""
    host = FakePlugin.milvus()
    settled, failed_id = await a_failed_first_upload(host, restart)
    assert await settled.component.delete_document(KB, failed_id) is True
    assert host.vectors_of(KB, failed_id) == [], "the deleted file's vectors leaked"
    assert host.dims.get(KB) in (None, DIM)
    await no_entry_after_a_restart(host)


async def test_a_failed_file_uploaded_again_while_it_is_deleted_creates_no_default_collection():
    """A new Milvus KB's first file FAILED without a vector; the operator deletes it and uploads
    the same document again at once. Replacing the earlier version while the delete runs must not
    delete from a collection that does not exist (Milvus would create it with dimension 1536, and
    refuse every vector of the model)."""
    host = FakePlugin.milvus()
    harness = Harness(host)
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    failed = await harness.ingest(KB, "empty.txt", b"", document_id="solar")
    assert failed.status == DocumentStatus.FAILED
    record_read, upserted = asyncio.Event(), asyncio.Event()
    real_get, real_upsert = host.get_plugin_storage, host.vector_upsert

    async def get(key: str) -> bytes:  # the delete, mid-way: holds the KB's lock until the upload wrote
        if key == file_record_key(KB, "solar"):
            record_read.set()
            await upserted.wait()
        return await real_get(key)

    async def upsert(*args, **kwargs):
        try:
            return await real_upsert(*args, **kwargs)
        finally:
            upserted.set()

    host.get_plugin_storage, host.vector_upsert = get, upsert
    deleting = asyncio.ensure_future(harness.component.delete_document(KB, "solar"))
    await record_read.wait()
    again = await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")
    assert await deleting is True
    assert host.dims[KB] == DIM, "a collection with Milvus' default dimension was created"
    assert again.status == DocumentStatus.COMPLETED, again.error_message


@pytest.mark.parametrize("restart", [False, True], ids=["same-process", "after-a-restart"])
async def test_deleting_the_kb_of_such_a_failed_file_at_once_removes_its_vectors(restart: bool):
    """LangBot leaves a deleted KB's vectors to the engine (HOST_CONTRACT.md)."""
    host = FakePlugin.milvus()
    settled, _ = await a_failed_first_upload(host, restart)
    await settled.component.on_knowledge_base_delete(KB)
    assert host.vectors_of(KB) == [], "the deleted KB's vectors leaked"
    assert host.dims.get(KB) in (None, DIM) and not host.storage


async def test_the_first_batch_a_dead_process_wrote_into_a_new_kb_is_removed_after_the_restart():
    """kill -9 after the first of a long file's batches reached LangBot, before the KB's mark was
    cleared: an interrupted file keeps all of its vectors or none, and Milvus' collection keeps the
    model's dimension."""
    host = FakePlugin.milvus()
    harness = Harness(host)
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    store = KbStore(host, KB)
    await harness.invoke(store.write_journal, JournalEntry("crashed", 150, DIM))
    chunks = [ChunkRecord(chunk_uuid("crashed", i), "crashed", i, f"Part {i} of the pump.") for i in range(100)]
    await harness.invoke(lambda: host.vector_upsert(
        collection_id=KB, vectors=[hash_embed(c.text) for c in chunks], ids=[c.chunk_id for c in chunks],
        metadata=[c.metadata("text") for c in chunks]))
    back = restarted(host)
    for _ in range(2):
        await back.retrieve(KB, "pump")
    assert host.vectors_of(KB, "crashed") == [] and host.dims[KB] == DIM
    assert not [k for k in host.storage if "/journal/" in k]
    tea = await back.ingest(KB, "tea.txt", TEA)
    assert tea.status == DocumentStatus.COMPLETED, tea.error_message


async def test_a_first_file_committed_while_the_kb_mark_and_its_journal_entry_stayed_is_kept(host):
    """The stored mark still says "never had a vector" and the file's journal entry is left (both
    writes failed), but its record is stored: after a restart it is an answer, not a failed write
    whose vectors go (sim seed 411)."""
    harness = Harness(host)
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    host.fail("set_plugin_storage", when=lambda key, **_: key == meta_key(KB))
    host.fail("delete_plugin_storage", when=lambda key, **_: "/journal/" in key)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    assert solar.status == DocumentStatus.COMPLETED, solar.error_message
    assert journal_key(KB, solar.document_id) in host.storage
    assert (await harness.invoke(KbStore(host, KB).load_meta)).has_vectors is False
    host.faults.clear()
    back = restarted(host)
    for mode in ("vector", "keyword"):
        assert "42 kilowatts" in (await back.texts(KB, "solar array kilowatts", settings={"search_mode": mode}))[0]
    assert len(host.vectors_of(KB, solar.document_id)) == solar.chunks_created
    assert journal_key(KB, solar.document_id) not in host.storage


@pytest.mark.parametrize("restart", [False, True], ids=["same-process", "after-a-restart"])
async def test_a_new_milvus_kbs_first_upsert_that_never_reached_the_host_creates_no_default_collection(restart: bool):
    """The same lost answer, but LangBot never got the call: nothing was written and no collection
    exists. Removing the file must not make Milvus create one with its default dimension (1536),
    which would refuse every vector of the real model."""
    host = FakePlugin.milvus()
    settled, _ = await a_failed_first_upload(host, restart, written=False)
    for _ in range(2):
        await settled.retrieve(KB, "anything")
    assert host.dims.get(KB) in (None, DIM), "a collection with Milvus' default dimension was created"
    assert host.vectors_of(KB) == []
    await no_entry_after_a_restart(host)
    assert host.dims.get(KB) in (None, DIM)
    tea = await settled.ingest(KB, "tea.txt", TEA)
    assert tea.status == DocumentStatus.COMPLETED, tea.error_message


async def test_an_adopted_file_keeps_its_journal_entry_until_its_record_is_saved(harness: Harness, host):
    """A restart adopts a journalled file whose vectors are all there, but storage refuses its
    record: the entry is all that names the file, so a later request must not delete it before the
    record is saved, or the next restart loses a COMPLETED file (sim seed 5434)."""
    await harness.ingest(KB, "tea.txt", TEA)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    for key in record_keys(host, solar.document_id):  # a crash after its vectors, before its record
        del host.storage[key]
    await harness.invoke(KbStore(host, KB).write_journal, JournalEntry(solar.document_id, solar.chunks_created))
    back = restarted(host)
    back.host.fail("set_plugin_storage", when=lambda key, **_: "/file/" in key)
    for _ in range(3):
        await back.retrieve(KB, "anything")
    assert state_of(back).unsaved.get(solar.document_id) is not None, "adopted, its record unsaved"
    assert journal_key(KB, solar.document_id) in host.storage, "nothing else names the file"
    again = restarted(host)
    for mode in ("vector", "keyword"):
        assert "42 kilowatts" in (await again.texts(KB, "solar array kilowatts", settings={"search_mode": mode}))[0]


# ---------------------------------------------------------------- repair
async def test_repair_rebuilds_records_from_the_vectors_not_from_stale_storage(harness: Harness, host):
    document_id = "doc-stale"
    await harness.ingest(KB, "a.txt", b"The old manual says the valve is blue.", document_id=document_id)
    stale = dict((k, v) for k, v in host.storage.items() if k.startswith(file_record_key(KB, document_id)))
    await harness.ingest(KB, "a.txt", b"The new manual says the valve is orange.", document_id=document_id)
    host.storage.update(stale)  # storage still has the first version's record
    back = restarted(host)
    state = state_of(back)
    await back.invoke(state.ensure_loaded, back.host, KB)
    assert await back.invoke(state.rebuild_from_vector_db, back.host, KB)
    assert "orange" in (await back.texts(KB, "valve colour orange", settings=KEYWORD))[0]
    assert await back.texts(KB, "blue", settings=KEYWORD) == []
    state.records.clear()  # as if evicted from the cache: the repaired record is read from storage now
    listed = back.host.calls["vector_list"]
    assert "orange" in (await back.texts(KB, "valve colour orange", settings=KEYWORD))[0]
    assert back.host.calls["vector_list"] == listed, "after the repair, stored records are trusted again"
    assert "orange" in (await restarted(host).texts(KB, "valve orange", settings=KEYWORD))[0]


async def test_repair_marks_the_kb_as_having_vectors_and_keeps_its_metric(harness: Harness, host):
    await harness.ingest(KB, "solar.txt", SOLAR)
    await harness.retrieve(KB, "solar")  # the first query calibrates the distance metric
    state = state_of(harness)
    metric = state.metric
    assert metric is not None
    host.fail("set_plugin_storage", when=lambda key, **_: key == meta_key(KB))
    assert await harness.invoke(state.rebuild_from_vector_db, host, KB)
    assert state.meta.has_vectors is True and state.loaded and state.meta.dirty
    host.faults.clear()
    await harness.retrieve(KB, "solar")  # the meta write is retried
    meta = await harness.invoke(KbStore(host, KB).load_meta)
    assert meta is not None and meta.has_vectors is True and meta.metric == metric
    assert not state.meta.dirty


# ---------------------------------------------------------------- vector hits without a record
async def _restarted_after_losing_solars_record(harness: Harness, host):
    """Two files ingested, then the solar file's record vanishes from storage and the plugin
    restarts: the file is COMPLETED in LangBot, its vectors and index entry are all that is left."""
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    await harness.ingest(KB, "tea.txt", TEA)
    for key in record_keys(host, solar.document_id):
        del host.storage[key]
    return solar, restarted(host)


@pytest.mark.usefixtures("persist_every_segment")
async def test_vector_hits_of_a_file_whose_record_is_lost_are_returned_with_their_citation(harness: Harness, host):
    solar, back = await _restarted_after_losing_solars_record(harness, host)
    back.host.fail("vector_list", when=lambda filters=None, **_: bool(filters))  # nor rebuilt from its vectors
    response = await back.retrieve(KB, "solar array kilowatts", settings={"search_mode": "vector"})
    assert response.results and "42 kilowatts" in response.results[0].content[0].text
    assert response.results[0].metadata["file_id"] == solar.document_id
    state = state_of(back)
    assert set(state.repair.adopted) == {response.results[0].id}
    other = await back.ingest(KB, "tea.txt", TEA)
    await back.component.delete_document(KB, other.document_id)
    assert set(state.repair.adopted) == {response.results[0].id}, "deleting another file keeps this one's chunks"
    await back.component.delete_document(KB, solar.document_id)
    assert state.repair.adopted == {}


async def test_a_file_whose_record_is_rebuilt_leaves_unrecorded_for_the_keyword_index(harness: Harness, host):
    """A file the load found UNRECORDED (and took out of the keyword index) whose record is rebuilt
    from its vectors and saved is COMMITTED and found by keyword again."""
    solar, back = await _restarted_after_losing_solars_record(harness, host)
    assert await back.texts(KB, "solar array kilowatts", settings={"search_mode": "vector"})  # rebuilds it
    assert record_keys(host, solar.document_id)
    state = state_of(back)
    assert not state.files.of(FileState.UNRECORDED)
    texts = await back.texts(KB, "solar array kilowatts", settings={"search_mode": "keyword"})
    assert texts and "42 kilowatts" in texts[0]


def indexing_state() -> KnowledgeBaseState:
    """A state whose keyword index is not complete yet (storage lost, the vector DB being listed):
    any file's vector hits may be answers."""
    state = KnowledgeBaseState("kb")
    state.repair.storage_knows_nothing()
    state.repair.start_looking()
    return state


def test_a_chunk_is_learnt_from_its_vector_metadata():
    state = indexing_state()
    hit = {"id": "c1", "document": "ignored", "metadata": {
        "text": "Body", "file_id": "f1", "chunk_index": 3.0, "page": 2.0, "heading": "Intro",
        "document_name": "Manual"}}
    chunk = state.adopt_hit(hit)
    assert chunk == ChunkRecord("c1", "f1", 3, "Body", "Intro", 2, document_name="Manual")
    assert state.adopt_hit({"id": "c1", "metadata": {"text": "other", "file_id": "f9"}}) is chunk
    bare = state.adopt_hit({"id": 7, "document": "From the document field",
                            "metadata": {"file_id": 5, "chunk_index": "4", "page": 0}})
    assert bare == ChunkRecord("7", "5", 0, "From the document field", "", None, document_name="")
    assert state.adopt_hit({"id": "c3", "metadata": {"page": "2", "text": "T", "file_id": "f"}}).page is None
    assert state.adopt_hit({"id": "c4", "metadata": {"file_id": "f1"}}) is None, "no text"
    assert state.adopt_hit({"id": "c5", "document": "text", "metadata": {}}) is None, "no file"
    assert state.adopt_hit({"id": "c6", "document": "text"}) is None
    assert set(state.repair.adopted) == {"c1", "7", "c3"}
    state.repair.discovered(state.repair.discovery)  # the index is complete: a file nothing names is a failed ingest's leftover
    assert state.adopt_hit({"id": "c8", "metadata": {"text": "T", "file_id": "f8"}}) is None
    state.files.move("f8", FileState.UNRECORDED)  # the index snapshot named it, its record was lost
    assert state.adopt_hit({"id": "c8", "metadata": {"text": "T", "file_id": "f8"}}) is not None


def test_learnt_chunks_are_bounded(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(repairstate, "ADOPTED_LIMIT", 2)
    state = indexing_state()
    for i in range(3):
        state.adopt_hit({"id": f"c{i}", "metadata": {"text": "T", "file_id": "f"}})
    assert set(state.repair.adopted) == {"c2"}
    state.adopt_hit({"id": "c3", "metadata": {"text": "T", "file_id": "f"}})
    assert set(state.repair.adopted) == {"c2", "c3"}



# ---------------------------------------------------------------- retrying what storage refused
async def test_a_request_with_nothing_to_retry_writes_nothing_to_storage(harness: Harness, host):
    unlogged = {"query_log": "off"}  # the question log is written beside queries
    await harness.ingest(KB, "tea.txt", TEA)
    await harness.ingest(KB, "solar.txt", SOLAR)
    await harness.retrieve(KB, "solar", settings=unlogged)
    assert not state_of(harness).needs_upkeep()
    writes = host.calls["set_plugin_storage"] + host.calls["delete_plugin_storage"]
    await harness.retrieve(KB, "tea", settings=unlogged)
    await harness.retrieve(KB, "oolong", settings={**KEYWORD, **unlogged})
    assert host.calls["set_plugin_storage"] + host.calls["delete_plugin_storage"] == writes


async def test_the_kb_mark_that_storage_refused_is_written_by_a_later_request(harness: Harness, host):
    host.fail("set_plugin_storage", when=lambda key, **_: key == meta_key(KB))
    await harness.ingest(KB, "solar.txt", SOLAR)
    await harness.retrieve(KB, "solar")
    state = state_of(harness)
    assert state.meta.dirty and state.metric is not None
    host.faults.clear()
    await harness.retrieve(KB, "solar")
    meta = await harness.invoke(KbStore(host, KB).load_meta)
    assert meta is not None and (meta.metric, meta.has_vectors) == (state.metric, True)
    assert not state.needs_upkeep()


async def test_an_unsaved_record_is_saved_later_and_its_journal_entry_then_removed(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("set_plugin_storage", when=lambda key, **_: "/file/" in key)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    assert journal_key(KB, solar.document_id) in host.storage, "kept until the record is saved"
    host.faults.clear()
    await harness.retrieve(KB, "anything")
    assert record_keys(host, solar.document_id)
    assert journal_key(KB, solar.document_id) not in host.storage
    assert not state_of(harness).needs_upkeep()
    assert "42 kilowatts" in (await restarted(host).texts(KB, "solar array kilowatts", settings=KEYWORD))[0]


async def test_a_journal_entry_that_storage_failed_to_delete_is_deleted_later(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("delete_plugin_storage", when=lambda key, **_: "/journal/" in key)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    assert journal_key(KB, solar.document_id) in host.storage
    host.faults.clear()
    await harness.retrieve(KB, "anything")
    assert journal_key(KB, solar.document_id) not in host.storage
    assert not state_of(harness).needs_upkeep()


async def test_a_record_whose_deletion_failed_is_kept_when_the_file_was_uploaded_again(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    host.fail("delete_plugin_storage", when=lambda key, **_: "/file/" in key)
    await harness.component.delete_document(KB, solar.document_id)  # its record is still stored
    again = await harness.ingest(KB, "solar.txt", SOLAR, document_id=solar.document_id)
    assert again.status == DocumentStatus.COMPLETED
    host.faults.clear()
    await harness.retrieve(KB, "anything")
    assert record_keys(host, solar.document_id), "the re-uploaded file's record must stay"
    assert not state_of(harness).needs_upkeep()
    assert "42 kilowatts" in (await restarted(host).texts(KB, "solar array kilowatts", settings=KEYWORD))[0]


# ---------------------------------------------------------------- adopting a finished ingest
def metadata_dropping_host() -> FakePlugin:
    """Like Milvus/pgvector: vectors keep only text and file id, so a record rebuilt from them
    has no heading and no document name."""
    return FakePlugin(keep_metadata=("text", "file_id", "uuid"))


MANUAL = b"# Pump manual\n\nThe M7 pump needs part PX-7-2 every spring."


@pytest.mark.usefixtures("persist_every_segment")
async def test_adoption_keeps_the_stored_record_when_only_the_index_snapshot_was_lost():
    host = metadata_dropping_host()
    harness = Harness(host)
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("set_plugin_storage", when=lambda key, **_: "/kw/" in key)  # the index cannot be saved
    manual = await harness.ingest(KB, "manual.md", MANUAL)
    assert journal_key(KB, manual.document_id) in host.storage and record_keys(host, manual.document_id)
    host.faults.clear()
    back = restarted(host)  # the journal entry is settled by adopting the file
    first = (await back.retrieve(KB, "PX-7-2 part", settings=KEYWORD)).results[0]
    assert journal_key(KB, manual.document_id) not in host.storage
    again = (await restarted(host).retrieve(KB, "PX-7-2 part", settings=KEYWORD)).results[0]
    for hit in (first, again):
        assert "PX-7-2" in hit.content[0].text
        assert hit.metadata.get("heading") == "Pump manual", "the stored record (with headings) was kept"


async def test_an_adopted_file_whose_record_was_lost_is_saved_by_the_first_request():
    host = FakePlugin()
    harness = Harness(host)
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("set_plugin_storage", when=lambda key, **_: "/file/" in key)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    host.faults.clear()
    back = restarted(host)  # the unsaved record died with the process
    assert "42 kilowatts" in (await back.texts(KB, "solar array kilowatts", settings=KEYWORD))[0]
    assert record_keys(host, solar.document_id), "adopting the file saved its record"
    assert journal_key(KB, solar.document_id) not in host.storage
    assert not state_of(back).needs_upkeep()


async def test_an_adopted_file_whose_record_cannot_be_saved_yet_is_saved_by_a_later_request():
    host = FakePlugin()
    harness = Harness(host)
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("set_plugin_storage", when=lambda key, **_: "/file/" in key)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    back = restarted(host)
    back.host.fail("set_plugin_storage", when=lambda key, **_: "/file/" in key)  # still refused
    assert "42 kilowatts" in (await back.texts(KB, "solar array kilowatts", settings=KEYWORD))[0]
    state = state_of(back)
    assert solar.document_id in state.unsaved and solar.document_id not in state.journals
    assert state.unsaved[solar.document_id].chunks
    back.host.faults.clear()
    await back.retrieve(KB, "anything")
    await back.retrieve(KB, "anything")
    assert record_keys(host, solar.document_id)
    assert journal_key(KB, solar.document_id) not in host.storage
    assert not state.needs_upkeep()


async def test_after_a_restart_records_are_read_from_storage_not_rebuilt_from_vectors():
    host = metadata_dropping_host()
    harness = Harness(host)
    await harness.ingest(KB, "tea.txt", TEA)
    await harness.ingest(KB, "manual.md", MANUAL)
    back = restarted(host)
    hit = (await back.retrieve(KB, "PX-7-2 part", settings=KEYWORD)).results[0]
    assert hit.metadata.get("heading") == "Pump manual"
    # every record was in plugin storage: one look for the files' chunk-0 vectors, no listing of them
    assert back.host.calls["vector_list"] <= 1


async def test_the_metric_and_the_has_vectors_mark_are_stored_once_measured(harness: Harness, host):
    await harness.ingest(KB, "solar.txt", SOLAR)
    await harness.retrieve(KB, "solar")
    state = state_of(harness)
    assert state.metric is not None and not state.meta.dirty
    assert await harness.invoke(KbStore(host, KB).load_meta) == KbMeta(state.metric, True)
    assert await harness.invoke(state.rebuild_from_vector_db, host, KB)
    assert await harness.invoke(KbStore(host, KB).load_meta) == KbMeta(state.metric, True)


async def test_re_uploading_a_file_whose_first_record_was_unsaved_keeps_the_new_version(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("set_plugin_storage", when=lambda key, **_: "/file/" in key)
    first = await harness.ingest(KB, "valve.txt", b"The valve is painted blue.")
    host.faults.clear()
    await harness.ingest(KB, "valve.txt", b"The valve is painted orange.", document_id=first.document_id)
    await harness.retrieve(KB, "anything")
    assert not state_of(harness).unsaved
    texts = await restarted(host).texts(KB, "valve painted", settings={**KEYWORD, "source_line": False})
    assert texts == ["The valve is painted orange."]


@pytest.mark.usefixtures("persist_every_segment")
@pytest.mark.parametrize("refused", ["/kw/", "/kw/manifest"])
async def test_an_index_snapshot_that_could_not_be_written_is_written_by_a_later_request(harness: Harness, host,
                                                                                        refused: str):
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("set_plugin_storage", when=lambda key, **_: refused in key)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    state = state_of(harness)
    assert state.snapshot.dirty
    host.faults.clear()
    await harness.retrieve(KB, "anything")
    assert not state.snapshot.dirty and not state.needs_upkeep()
    back = restarted(host)
    back_state = state_of(back)
    await back.invoke(back_state.ensure_loaded, back.host, KB, False)
    assert solar.document_id in back_state.index and not back_state.to_index, "the snapshot has the file"


async def test_an_orphan_index_segment_is_deleted_once(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    orphan = index_segment_key(KB, "orphan")
    host.storage[orphan] = b"Zleft by a crash"
    back = restarted(host)
    await back.retrieve(KB, "tea")
    await back.retrieve(KB, "tea")
    assert orphan not in host.storage
    assert not state_of(back).needs_upkeep()


async def test_other_kbs_uploads_continue_finding_a_kbs_files_in_the_vector_db(harness: Harness, host, monkeypatch):
    """(Other KBs' queries do not: indexing would cost them up to their upkeep budget, see
    test_restart_load; the KB's own queries continue it too.)"""
    await harness.ingest("kb-other", "tea.txt", TEA)
    for i in range(3):
        await harness.ingest(KB, f"f{i}.txt", f"Gadget G{i} is stored in bay {i}.".encode())
    for key in [k for k in host.storage if k.startswith(f"lucidrag/v1/kb/{KB}/")]:
        del host.storage[key]  # storage lost everything of this KB: its files are found in the vector DB
    monkeypatch.setattr(kbload_module, "FIRST_LOAD_BUDGET_S", 0.0)
    monkeypatch.setitem(engine_module.UPKEEP_BUDGET_S, "retrieve", 0.0)
    back = restarted(host)
    await back.retrieve(KB, "gadget", settings=KEYWORD)
    state = state_of(back)
    assert state.indexing
    monkeypatch.setitem(engine_module.UPKEEP_BUDGET_S, "retrieve", 60.0)
    await back.retrieve("kb-other", "tea")
    assert state.indexing, "another KB's query leaves it to the KB's own hooks and to uploads"
    for i in range(3):
        await back.ingest("kb-other", f"tea{i}.txt", TEA)  # the installation's later uploads continue it
    assert not state.indexing
    assert len(state.index.file_ids()) == 3


async def test_journal_entries_of_a_kb_that_never_had_a_vector_are_cleared_without_the_vector_db(host):
    harness = Harness(host)
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    store = KbStore(host, KB)
    for file_id in ("crashed-1", "crashed-2"):  # died before the first upsert
        await harness.invoke(store.write_journal, JournalEntry(file_id, 3))
    back = restarted(host)
    await back.retrieve(KB, "anything")
    assert not [k for k in host.storage if "/journal/" in k]
    assert not any(back.host.calls[m] for m in ("vector_list", "vector_search", "vector_delete"))


async def test_an_unreadable_journal_entry_without_vectors_leaves_no_record(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    host.storage[journal_key(KB, "ghost")] = b"garbage"
    back = restarted(host)
    await back.retrieve(KB, "anything")
    assert journal_key(KB, "ghost") not in host.storage
    assert record_keys(host, "ghost") == []
    assert "ghost" not in state_of(back).known_files()


@pytest.mark.usefixtures("persist_every_segment")
async def test_a_record_rebuilt_from_vectors_that_cannot_be_saved_is_saved_later(harness: Harness, host):
    solar, back = await _restarted_after_losing_solars_record(harness, host)
    back.host.fail("set_plugin_storage", when=lambda key, **_: "/file/" in key)
    assert "42 kilowatts" in (await back.texts(KB, "solar array kilowatts", settings={"search_mode": "vector"}))[0]
    state = state_of(back)
    assert state.unsaved[solar.document_id].chunks
    back.host.faults.clear()
    await back.retrieve(KB, "anything")
    assert record_keys(host, solar.document_id) and not state.unsaved


# ---------------------------------------------------------------- what a restart knows
async def test_the_first_upload_into_a_created_kb_stores_that_it_has_vectors(harness: Harness, host):
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    assert (await harness.invoke(KbStore(host, KB).load_meta)).has_vectors is False
    await harness.ingest(KB, "solar.txt", SOLAR)
    meta = await harness.invoke(KbStore(host, KB).load_meta)
    assert meta is not None and meta.has_vectors is True
    state = state_of(harness)
    assert state.meta.has_vectors is True and not state.fresh and not state.meta.dirty


async def test_a_restart_keeps_the_measured_metric(harness: Harness, host):
    await harness.ingest(KB, "solar.txt", SOLAR)
    await harness.retrieve(KB, "solar")
    metric = state_of(harness).metric
    back = restarted(host)
    await back.retrieve(KB, "solar")
    assert metric is not None and state_of(back).metric == metric


async def test_marking_a_kb_whose_meta_could_not_be_read_keeps_the_stored_metric(harness: Harness, host):
    """A process whose load could not read the meta marks the KB "has had vectors" (its records are
    listed) and saves the meta at its next commit: that save wrote `metric: null` over the measured
    metric, which the next process then had to measure again. Now a save that does not know the
    metric reads the stored meta first (once it answers) and keeps its metric."""
    await harness.ingest(KB, "solar.txt", SOLAR)
    await harness.retrieve(KB, "solar")
    metric = state_of(harness).metric
    assert metric is not None and (await harness.invoke(KbStore(host, KB).load_meta)).metric == metric
    back = restarted(host)
    reads = iter(range(1_000))
    back.host.fail("get_plugin_storage", when=lambda key, **_: key == meta_key(KB) and next(reads) == 0)
    await back.ingest(KB, "tea.txt", TEA)  # the load's read of the meta fails; the commit saves it
    assert state_of(back).meta.has_vectors is True and not state_of(back).meta.dirty
    assert await harness.invoke(KbStore(host, KB).load_meta) == KbMeta(metric, True)


async def test_an_upload_after_a_failed_storage_listing_learns_which_files_exist(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    back = restarted(host)
    back.host.fail("get_plugin_storage_keys")
    await back.retrieve(KB, "tea")  # the load could not list storage
    assert not state_of(back).files.records_listed
    back.host.faults.clear()
    before = back.host.calls["vector_delete"]
    new = await back.ingest(KB, "solar.txt", SOLAR)
    assert new.status == DocumentStatus.COMPLETED
    assert back.host.calls["vector_delete"] == before, "storage says the file is new: nothing to delete first"


async def test_a_shorter_re_upload_while_storage_cannot_be_listed_replaces_every_old_chunk(harness: Harness, host):
    long_doc = await harness.ingest(KB, "parts.txt", b"\n\n".join(
        f"Part {i} of the pump is checked weekly.".encode() for i in range(40)),
        settings={"chunk_size": 64, "chunk_overlap": 0})
    assert len(host.vectors_of(KB, long_doc.document_id)) > 3
    for key in [k for k in host.storage if "/kw/" in k]:
        del host.storage[key]
    back = restarted(host)
    back.host.fail("get_plugin_storage_keys")  # whether the id exists cannot be known
    again = await back.ingest(KB, "parts.txt", b"Part 1 of the pump is checked weekly.",
                              document_id=long_doc.document_id, settings={"chunk_size": 64, "chunk_overlap": 0})
    assert again.status == DocumentStatus.COMPLETED
    assert len(host.vectors_of(KB, long_doc.document_id)) == 1, "the old version's chunks were deleted first"


# ---------------------------------------------------------------- nothing deleted or failed comes back
async def solar_found_after_a_restart(host: FakePlugin) -> bool:
    """Whether a new process over the same host answers a keyword question with the solar file."""
    texts = await restarted(host).texts(KB, "solar array kilowatts", settings=KEYWORD)
    return any("42 kilowatts" in t for t in texts)


async def test_a_delete_never_trusts_a_storage_listing_older_than_the_files_record(host):
    harness = Harness(host)
    await harness.ingest(KB, "tea.txt", TEA)
    back = restarted(host)
    stale = await back.invoke(list_keys, back.host)  # LangBot reads the keys now...
    back.host.fail("get_plugin_storage_keys")
    await back.retrieve(KB, "tea")
    solar = await back.ingest(KB, "solar.txt", SOLAR)
    back.host.faults.clear()
    state_of(back).seed(stale)  # ...and its answer arrives after the commit saved solar's record
    back.host.fail("delete_plugin_storage", when=lambda key, **_: "/file/" in key)
    assert await back.component.delete_document(KB, solar.document_id)
    assert record_keys(host, solar.document_id), "storage refused to delete the record"
    assert not await solar_found_after_a_restart(host), "a file whose delete returned True came back"


async def test_a_record_storage_refused_to_delete_is_no_answer_after_a_restart(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    host.fail("delete_plugin_storage", when=lambda key, **_: "/file/" in key)
    await harness.component.delete_document(KB, solar.document_id)
    assert record_keys(host, solar.document_id), "storage refused to delete the record"
    assert not await solar_found_after_a_restart(host), "a file being deleted was answered"
    assert record_keys(host, solar.document_id) == [], "the restart removed the record"


async def test_a_record_saved_without_an_answer_does_not_bring_a_failed_first_upload_back(host):
    harness = Harness(host)
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    real_set = host.set_plugin_storage

    async def meta_refused_records_written_unanswered(key: str, value: bytes) -> None:
        if key == meta_key(KB):
            raise RuntimeError("set_plugin_storage failed")
        await real_set(key, value)
        if "/file/" in key:
            raise ActionCallTimeoutError("set_plugin_storage timed out")  # written, answer lost

    host.set_plugin_storage = meta_refused_records_written_unanswered  # type: ignore[method-assign]
    failed = await harness.ingest(KB, "solar.txt", SOLAR)
    del host.set_plugin_storage
    assert failed.status == DocumentStatus.FAILED
    assert not await solar_found_after_a_restart(host), "a FAILED file was answered"


async def test_a_failed_re_upload_of_a_document_id_leaves_no_old_version_to_answer(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    host.fail("vector_upsert")
    again = await harness.ingest(KB, "solar.txt", SOLAR + b" Revised.", document_id=solar.document_id)
    host.faults.clear()
    assert again.status == DocumentStatus.FAILED
    assert record_keys(host, solar.document_id) == [], "the old version's record was left"
    assert not await solar_found_after_a_restart(host), "a FAILED file was answered"


async def test_a_record_save_that_lands_after_the_delete_does_not_bring_the_file_back(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("set_plugin_storage", when=lambda key, **_: "/file/" in key)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    host.faults.clear()
    assert solar.document_id in state_of(harness).unsaved
    land = asyncio.Event()
    landed: list[asyncio.Task[None]] = []
    real_set = host.set_plugin_storage

    async def lands_later(key: str, value: bytes) -> None:
        if "/file/" not in key:
            return await real_set(key, value)

        async def finish() -> None:  # LangBot goes on with a call the plugin gave up on
            await land.wait()
            host.storage[key] = bytes(value)
        landed.append(asyncio.get_running_loop().create_task(finish()))
        raise ActionCallTimeoutError("set_plugin_storage timed out")

    host.set_plugin_storage = lands_later  # type: ignore[method-assign]
    await harness.retrieve(KB, "tea")  # retries the record's save, which gives up
    assert await harness.component.delete_document(KB, solar.document_id)
    land.set()
    await asyncio.gather(*landed)
    del host.set_plugin_storage
    assert record_keys(host, solar.document_id), "the abandoned save landed after the delete"
    assert not await solar_found_after_a_restart(host), "a file whose delete returned True came back"


async def test_a_journal_entry_storage_failed_to_read_keeps_a_failed_file_out_of_a_rebuild(host):
    harness = Harness(host)
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("vector_upsert", when=on_call(2), error=RuntimeError("vector DB went away"))
    host.fail("vector_delete")
    failed = await harness.ingest(KB, "big.txt", long_text(1000), document_id="big")
    host.faults.clear()
    assert failed.status == DocumentStatus.FAILED and host.vectors_of(KB, "big"), "its rollback failed"
    back = restarted(host)
    back.host.fail("get_plugin_storage", when=lambda key, **_: key == journal_key(KB, "big"))
    await back.retrieve(KB, "tea")  # reconciles: the entry cannot be read
    back.host.faults.clear()
    state = state_of(back)
    assert state.files.state("big") is FileState.JOURNALLED, "one failed read settles nothing"
    await back.invoke(state.rebuild_from_vector_db, back.host, KB)
    assert not [t for t in await back.texts(KB, "component QX-7 inspected weeks team", settings=KEYWORD)
                if "QX-7" in t], "a FAILED file was answered"
    assert record_keys(host, "big") == [], "the rebuild saved a record for a FAILED file"
