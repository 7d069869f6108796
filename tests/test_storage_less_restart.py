"""A KB whose plugin storage names none of its files (a host whose storage writes all fail, or a KB
created during a storage write outage) in the first hooks after a restart, before its files were
found in the vector DB: whether an uploaded id is a re-upload is asked of the vector DB, a save
that would end the storage-empty mode waits until storage was listed, and a delete does not let
an unanswered upsert of the file land after it with nothing left to say the file was deleted.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

import lucidrag.engine
from lucidrag.state import lifecycle
from lucidrag.state.kbcore import FileDeletion
from lucidrag.state.latewrites import delete_file_vectors
from lucidrag.state.metastate import MetaState
from lucidrag.state.records import PROBE_FILE_ID, chunk_uuid, tombstone_vector_id
from lucidrag.state.storage_keys import file_record_key
from lucidrag.state.store import KbStore
from tests.conftest import FakePlugin, Harness
from tests.test_late_writes import answer_lost_once
from tests.test_state_runtime import long_text, restarted

KB = "kb-storage-less"
TEA = b"Oolong tea is partially oxidised. The Tieguanyin cultivar comes from Anxi in Fujian."
SOLAR = b"The solar array on building C produces 42 kilowatts at noon in June."
CREATE = {"embedding_model_uuid": "embed-model-1"}
EARLIER = "component QX-7 inspected weeks team"  # words of long_text's chunks only


async def found(harness: Harness, query: str, mode: str) -> list[str]:
    result = await harness.retrieve(KB, query, settings={"search_mode": mode})
    return sorted({str(e.metadata.get("file_id")) for e in result.results})


async def a_storage_less_kb_with(host: FakePlugin, **files: bytes) -> None:
    """A KB on a host whose plugin-storage writes all fail, holding these COMPLETED files."""
    harness = Harness(host)
    host.fail("set_plugin_storage")
    await harness.component.on_knowledge_base_create(KB, CREATE)
    for file_id, data in files.items():
        assert (await harness.ingest(KB, f"{file_id}.txt", data, document_id=file_id)).status == DocumentStatus.COMPLETED


def deletes_of(host: FakePlugin) -> list[list[str]]:
    """The file ids of every vector delete from now on."""
    real, sent = host.vector_delete, []

    async def delete(*args: Any, **kwargs: Any) -> int:
        sent.append(list(kwargs.get("file_ids") or []))
        return await real(*args, **kwargs)

    host.vector_delete = delete  # type: ignore[method-assign]
    return sent


async def test_a_re_upload_before_the_kbs_files_were_found_removes_the_earlier_version():
    """Seed 6787 of tests/sim: taken for a new file, the re-upload's one chunk replaced the earlier
    version's chunk 0 only, and its other chunks were answered. An id the vector DB does not hold
    is a new file: nothing is deleted for it."""
    host = FakePlugin.milvus()
    await a_storage_less_kb_with(host, doc=long_text(40))
    assert len(host.vectors_of(KB, "doc")) > 2

    back = restarted(host)
    back.host.fail("set_plugin_storage")
    sent = deletes_of(back.host)
    assert (await back.ingest(KB, "solar.txt", SOLAR, document_id="solar")).status == DocumentStatus.COMPLETED
    assert ["solar"] not in sent

    again = restarted(host)
    again.host.fail("set_plugin_storage")
    reupload = await again.ingest(KB, "tea.txt", TEA, document_id="doc")
    assert reupload.status == DocumentStatus.COMPLETED and reupload.chunks_created == 1
    assert [i for i, (_, m) in host.collections[KB].items() if m["file_id"] == "doc"] == [chunk_uuid("doc", 0)]
    for mode in ("vector", "keyword", "hybrid"):
        assert "doc" not in await found(again, EARLIER, mode), mode


async def test_a_failed_re_upload_before_the_kbs_files_were_found_leaves_no_earlier_version_answered():
    """Seed 5809: the re-upload, taken for new, failed at its upsert (the vector DB refusing every
    write of the file, its rollback's too); the earlier version, never removed, was answered after
    the next restart although LangBot shows the file failed."""
    host = FakePlugin.milvus()
    await a_storage_less_kb_with(host, doc=TEA)
    back = restarted(host)
    back.host.fail("set_plugin_storage")
    of_doc = {chunk_uuid("doc", i) for i in range(-3, 3)}  # its chunks, and a removal's probe or tombstone
    back.host.fail("vector_upsert", when=lambda ids, **_: bool(of_doc & set(ids)))
    assert (await back.ingest(KB, "solar.txt", SOLAR, document_id="doc")).status == DocumentStatus.FAILED
    again = restarted(host)
    again.host.fail("set_plugin_storage")
    for mode in ("vector", "keyword", "hybrid"):
        assert await found(again, "Tieguanyin oolong Anxi", mode) == [], mode


async def test_a_first_save_while_storage_could_not_be_listed_waits_for_the_kbs_files_to_be_found():
    """Seed 7450: a KB created while every storage write failed holds files named by storage's
    emptiness alone; the next process could neither read the meta nor list storage at its load,
    and its first upload saved the meta and a record before the vector DB was looked through:
    after a restart storage was trusted and the earlier file was found by no search."""
    host = FakePlugin.milvus()
    await a_storage_less_kb_with(host, tea=TEA)
    back = restarted(host)  # storage takes writes again, but cannot be listed until solar's vectors are written
    back.host.fail("get_plugin_storage_keys", when=lambda **_: not host.vectors_of(KB, "solar"))
    assert (await back.ingest(KB, "solar.txt", SOLAR, document_id="solar")).status == DocumentStatus.COMPLETED
    for _ in range(3):  # later hooks find the KB's files and save their records
        await back.retrieve(KB, "anything")
    again = restarted(host)
    for mode in ("keyword", "vector", "hybrid"):  # (keyword first: no vector hit adopts tea)
        assert "tea" in await found(again, "Tieguanyin oolong Anxi", mode), mode
        assert "solar" in await found(again, "solar array kilowatts", mode), mode


def test_a_listing_without_the_meta_that_could_not_be_read_no_longer_says_the_kb_may_be_empty():
    """Seed 6766: the meta could not be read at the load (it was never stored: the KB was created
    during a storage write outage) and the listing failed; a later listing showed no meta, yet the
    commit of a good file on a healthy host was refused as if the stored meta might say "never had
    a vector" (a restart would then neither adopt its journal entry nor look for files)."""
    meta = MetaState()
    meta.unreadable_at_open(None)
    assert meta.may_say_empty
    meta.listed(False)
    assert not meta.may_say_empty


async def test_a_delete_while_an_upsert_of_the_file_may_land_where_storage_takes_no_write_deletes_nothing(monkeypatch):
    """Seed 6481 (with a re-upload's check of the vector DB): no journal entry can say the file was
    deleted, so an unanswered upsert of it landing after the delete would bring it back, complete,
    to the next process's look through the vector DB. The delete answers False with the file whole,
    and succeeds once the upsert can no longer land."""
    window = 0.3
    monkeypatch.setattr(lifecycle, "PREVIOUS_PROCESS_LANDING_S", window)
    host = FakePlugin()
    harness = Harness(host)
    host.fail("set_plugin_storage")
    await harness.component.on_knowledge_base_create(KB, CREATE)
    landings = answer_lost_once(host, "solar")
    assert (await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")).status == DocumentStatus.COMPLETED
    assert landings
    assert await harness.component.delete_document(KB, "solar") is False
    assert host.vectors_of(KB, "solar") and await found(harness, "solar array kilowatts", "vector") == ["solar"]
    await landings[0]()  # LangBot finishes the upsert the plugin gave up on
    await asyncio.sleep(window)  # and it can no longer land
    assert await harness.component.delete_document(KB, "solar") is True
    back = restarted(host)
    back.host.fail("set_plugin_storage")
    for mode in ("vector", "keyword", "hybrid"):
        assert await found(back, "solar array kilowatts", mode) == [], mode


async def a_failed_upload_tombstoned_by_a_dead_process(host: FakePlugin, file_id: str) -> None:
    """A KB with a COMPLETED file; then a process whose plugin storage could not be listed and
    refused every write fails an upload of `file_id` (a new id), and as the vector DB refused the
    removal of a possible earlier version, writes its tombstone and a sweep note; it dies."""
    harness = Harness(host)
    await harness.component.on_knowledge_base_create(KB, CREATE)
    assert (await harness.ingest(KB, "tea.txt", TEA, document_id="tea")).status == DocumentStatus.COMPLETED
    dying = restarted(host)
    for method in ("get_plugin_storage_keys", "set_plugin_storage", "delete_plugin_storage", "vector_delete"):
        dying.host.fail(method)
    assert (await dying.ingest(KB, "solar.txt", SOLAR, document_id=file_id)).status == DocumentStatus.FAILED
    assert tombstone_vector_id(file_id) in host.collections[KB]
    assert any(f"file {file_id} " in m["text"] for m in host.vectors_of(KB, PROBE_FILE_ID)), "its sweep note"


async def test_an_upload_of_an_id_a_dead_process_tombstoned_removes_the_tombstone_first():
    """Seed 7150 (kept at 7124): the next process's upload of the id, taken for new (storage names
    nothing of it), COMPLETED beside the dead process's tombstone, and a later process took the
    file for failed and removed it. The sweep note beside the tombstone names the id: the upload
    replaces it, tombstone and all."""
    host = FakePlugin.milvus()
    await a_failed_upload_tombstoned_by_a_dead_process(host, "doc")
    back = restarted(host)
    assert (await back.ingest(KB, "solar.txt", SOLAR, document_id="doc")).status == DocumentStatus.COMPLETED
    again = restarted(host)
    for mode in ("vector", "keyword", "hybrid"):
        assert "doc" in await found(again, "solar array kilowatts", mode), mode
    assert "tea" in await found(again, "Tieguanyin oolong Anxi", "keyword")
    assert tombstone_vector_id("doc") not in host.collections[KB]


async def test_uploads_list_the_sweep_notes_once_per_process_and_not_on_a_kb_created_by_it(monkeypatch):
    """What looking for a dead process's tombstones costs a healthy KB: one listing of
    lucidrag-probe at the first upload of a new id after a restart (while the previous process's
    calls may land: another once they cannot, unless a query's look came first), none at the next
    ones, none on a KB this process created."""
    host = FakePlugin.milvus()
    harness = Harness(host)
    probe_lists = listings_of(harness.host, PROBE_FILE_ID)
    await harness.component.on_knowledge_base_create(KB, CREATE)
    for n in range(3):
        await harness.ingest(KB, f"{n}.txt", SOLAR, document_id=f"doc-{n}")
    assert probe_lists == []
    monkeypatch.setattr(lucidrag.engine, "PREVIOUS_PROCESS_LANDING_S", 120.0)
    back = restarted(host)
    probe_lists = listings_of(back.host, PROBE_FILE_ID)
    for n in range(3, 6):
        assert (await back.ingest(KB, f"{n}.txt", TEA, document_id=f"doc-{n}")).status == DocumentStatus.COMPLETED
    assert len(probe_lists) == 1 and back.host.calls["vector_delete"] == 0


def listings_of(host: FakePlugin, file_id: str) -> list[dict[str, Any]]:
    """The vector listings by this file id from now on."""
    real, sent = host.vector_list, []

    async def listing(*args: Any, **kwargs: Any) -> dict[str, Any]:
        if (kwargs.get("filters") or {}).get("file_id") == file_id:
            sent.append(kwargs)
        return await real(*args, **kwargs)

    host.vector_list = listing  # type: ignore[method-assign]
    return sent


async def test_an_upload_on_a_storage_less_kb_asks_the_vector_db_once_a_dead_process_tombstone_has_landed(
        monkeypatch):
    """Seed 7150 where storage names none of the KB's files: the dead process's tombstone of the
    id lands after the restart (LangBot never cancels a dead plugin's calls). Asked at once, the
    vector DB said the id was new, and the tombstone landed beside the COMPLETED upload. The
    upload asks once no call of the dead process can land any more."""
    host = FakePlugin.milvus()
    await a_storage_less_kb_with(host, tea=TEA)
    dying = restarted(host)
    for method in ("set_plugin_storage", "vector_list", "vector_delete"):
        dying.host.fail(method)
    assert (await dying.ingest(KB, "solar.txt", SOLAR, document_id="doc")).status == DocumentStatus.FAILED
    collection = host.collections[KB]
    in_flight = {i: collection.pop(i) for i in list(collection) if collection[i][1]["file_id"] in ("doc", PROBE_FILE_ID)}
    assert tombstone_vector_id("doc") in in_flight, "its tombstone, still to be done by LangBot"

    window = 0.5
    monkeypatch.setattr(lucidrag.engine, "PREVIOUS_PROCESS_LANDING_S", window)
    back = restarted(host)
    back.host.fail("set_plugin_storage")
    # LangBot does the dead process's upsert within the window, wherever the new upload is then
    landed: list[bool] = []
    landing = asyncio.get_running_loop().call_at(
        back.host.engine.started + window / 2, lambda: landed.append(True) or collection.update(in_flight))
    assert (await back.ingest(KB, "solar.txt", SOLAR, document_id="doc")).status == DocumentStatus.COMPLETED
    if not landed:  # (the upload was done first: the upsert lands now)
        landing.cancel()
        collection.update(in_flight)
    again = restarted(host)
    again.host.fail("set_plugin_storage")
    for mode in ("vector", "keyword", "hybrid"):
        assert "doc" in await found(again, "solar array kilowatts", mode), mode


async def test_a_refused_delete_says_whether_an_upsert_may_still_land_or_the_record_stayed(monkeypatch):
    """`delete_file` answers why nothing was deleted, which the delete hook tells the operator
    ("… delete the file again after that" with how long, or "… did not remove the file's record"):
    an upsert of the file whose answer was lost may still land (until when), or plugin storage
    kept the file's record."""
    monkeypatch.setattr(lifecycle, "PREVIOUS_PROCESS_LANDING_S", 120.0)
    host = FakePlugin()
    harness = Harness(host)
    host.fail("set_plugin_storage")
    await harness.component.on_knowledge_base_create(KB, CREATE)
    answer_lost_once(host, "solar")
    assert (await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")).status == DocumentStatus.COMPLETED
    landing = await harness.invoke(deleting, host, "solar")
    assert not landing.durable and landing.writes_land_until > time.monotonic() + 60

    host = FakePlugin()
    harness = Harness(host)
    await harness.component.on_knowledge_base_create(KB, CREATE)
    assert (await harness.ingest(KB, "tea.txt", TEA, document_id="tea")).status == DocumentStatus.COMPLETED
    host.fail("set_plugin_storage")
    host.fail("delete_plugin_storage")
    assert await harness.invoke(deleting, host, "tea") == FileDeletion(durable=False, writes_land_until=0.0)
    assert host.vectors_of(KB, "tea") and file_record_key(KB, "tea") in host.storage, "nothing was deleted"


async def deleting(host: FakePlugin, file_id: str) -> FileDeletion:
    """`delete_file` as the delete hook calls it, its vectors deleted by file id."""
    state = host.engine.installation("dedicated").kb(KB)
    return await state.delete_file(KbStore(host, KB), file_id,
                                   lambda: delete_file_vectors(host, state.files, KB, [file_id]))
