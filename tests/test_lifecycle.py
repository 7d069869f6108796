"""Defects of the file lifecycle that a random history reaches too rarely (what goes wrong without
the guard is in each test's docstring)."""

from __future__ import annotations

import asyncio

from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from lucidrag.index.segindex import SegmentIndex
from lucidrag.state.records import chunk_uuid
from lucidrag.state.storage_keys import file_record_key, index_manifest_key, index_segment_key
from lucidrag.state.store import JournalEntry, KbStore
from tests.conftest import FakePlugin, Harness
from tests.fakes import hash_embed
from tests.test_engine import KB, SOLAR, TEA
from tests.test_state_runtime import restarted


async def test_a_journalled_file_past_milvus_listing_window_is_adopted_not_deleted(host: FakePlugin):
    """#3: `file_vectors` stopped at 16,000 items, so reconciliation took a 16,500-chunk file whose
    journal entry outlived its commit for an interrupted ingest and deleted it."""
    host.list_window = 16384
    file_id, count = "big-file", 16_500
    vector = hash_embed("pump pressure")
    host.collections[KB] = {
        chunk_uuid(file_id, i): (vector, {"file_id": file_id, "uuid": chunk_uuid(file_id, i), "chunk_index": i,
                                          "text": f"pump pressure reading {i}"})
        for i in range(count)
    }
    host.dims[KB] = len(vector)
    await KbStore(host, KB).write_journal(JournalEntry(file_id, count))
    harness = Harness(host)
    # the restart's hooks reconcile the journal entry, within their time each (storage holds nothing
    # else of the KB: its record waits until the collection's files are found, 33+ listing pages of
    # this fake host's 16,500 items, each hook as far as its time allows: more hooks on a busy CPU)
    for _ in range(100):
        await harness.retrieve(KB, "pump pressure")
        assert host.vector_count(KB) == count
        if not [k for k in host.storage if "/journal/" in k]:
            break
    assert not [k for k in host.storage if "/journal/" in k]


async def test_a_key_listing_that_failed_at_load_never_turns_live_segments_into_orphans(harness: Harness, host):
    """#7: with the listing failed at load, a later listing marked the live snapshot's segments as
    orphans and the upkeep deleted them: the next restart indexed the whole KB again."""
    await harness.ingest(KB, "tea.txt", TEA)
    back = restarted(host)
    back.host.fail("get_plugin_storage_keys")
    await back.retrieve(KB, "oolong")  # loads the snapshot without a listing
    back.host.faults.clear()
    await back.ingest(KB, "solar.txt", SOLAR)  # lists the keys now
    await back.retrieve(KB, "anything")  # upkeep
    live_now = set(SegmentIndex.manifest_segment_names(host.storage[index_manifest_key(KB)]))
    assert all(index_segment_key(KB, name) in host.storage for name in live_now)


async def test_a_first_ingest_with_a_failed_key_listing_leaves_milvus_collection_to_the_upsert():
    """#8: `is_stored` answered True when the listing failed, so the first ingest of a new KB
    called vector_delete; LangBot's Milvus adapter created the collection with dimension 1536 and
    the upsert of 64-dimension vectors was refused."""
    host = FakePlugin.milvus()
    harness = Harness(host)
    host.fail("get_plugin_storage_keys")
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    result = await harness.ingest(KB, "solar.txt", SOLAR)
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    assert host.dims[KB] == 64


async def test_a_file_deleted_while_a_restart_indexes_it_stays_deleted(harness: Harness, host: FakePlugin):
    """#4: `continue_indexing` read records outside the lock and indexed them under it, so a file
    deleted in between was indexed (and persisted) again: keyword search returned it."""
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    await harness.ingest(KB, "tea.txt", TEA)
    del host.storage[index_manifest_key(KB)]  # a restart without a snapshot indexes from the records
    back = restarted(host)
    reading, deleted = asyncio.Event(), asyncio.Event()
    record_key = file_record_key(KB, solar.document_id)
    read, remove = back.host.get_plugin_storage, back.host.delete_plugin_storage

    async def slow_read(key: str) -> bytes:
        value = await read(key)
        if key == record_key and not reading.is_set():  # the indexing's read, not the delete's
            reading.set()
            await deleted.wait()  # the file is deleted between reading its record and indexing it
        return value

    async def delete_and_tell(key: str) -> None:
        await remove(key)
        if key == record_key:
            deleted.set()

    back.host.get_plugin_storage = slow_read  # type: ignore[method-assign]
    back.host.delete_plugin_storage = delete_and_tell  # type: ignore[method-assign]

    async def delete_when_read() -> bool:
        await reading.wait()
        return await back.component.delete_document(KB, solar.document_id)

    _, ok = await asyncio.gather(back.retrieve(KB, "tea"), delete_when_read())
    assert ok is True
    assert await back.texts(KB, "solar array kilowatts", settings={"search_mode": "keyword"}) == []
    assert record_key not in host.storage
    # nor is it in the keyword index (and so in its persisted snapshot) to be filtered at query time
    assert solar.document_id not in back.host.engine.installation("dedicated").kb(KB).index


async def test_a_file_deleted_while_flush_saves_its_record_stays_deleted(harness: Harness, host: FakePlugin):
    """`flush` saved an UNSAVED file's record without the KB lock: a delete that ran meanwhile
    removed the record first, then the save landed and `flush` marked the file COMMITTED again;
    after a restart keyword search returned the deleted file."""
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("set_plugin_storage", when=lambda key, **_: "/file/" in key)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    assert solar.status == DocumentStatus.COMPLETED  # its journal entry names it; `flush` saves the record
    host.faults.clear()
    record_key = file_record_key(KB, solar.document_id)
    writing, deleted = asyncio.Event(), asyncio.Event()
    write, remove = host.set_plugin_storage, host.delete_plugin_storage

    async def slow_write(key: str, value: bytes) -> None:
        if key == record_key:
            writing.set()
            for _ in range(1000):  # the save is slow: whatever may run meanwhile does
                if deleted.is_set():
                    break
                await asyncio.sleep(0)
        await write(key, value)

    async def delete_and_tell(key: str) -> None:
        await remove(key)
        if key == record_key:
            deleted.set()

    host.set_plugin_storage = slow_write  # type: ignore[method-assign]
    host.delete_plugin_storage = delete_and_tell  # type: ignore[method-assign]

    async def delete_while_saving() -> bool:
        await writing.wait()
        return await harness.component.delete_document(KB, solar.document_id)

    _, ok = await asyncio.gather(harness.retrieve(KB, "tea"), delete_while_saving())  # upkeep flushes
    assert ok is True
    assert record_key not in host.storage
    assert await restarted(host).texts(KB, "solar array kilowatts", settings={"search_mode": "keyword"}) == []


async def test_a_file_deleted_while_its_record_is_rebuilt_from_its_vectors_stays_deleted(harness: Harness, host: FakePlugin):
    """`file_records` saved a record rebuilt from the vectors (storage had lost it) without the KB
    lock: a delete that ran meanwhile removed nothing, the save landed after it, and after a
    restart the deleted file was answered again."""
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    await harness.ingest(KB, "tea.txt", TEA)
    record_key = file_record_key(KB, solar.document_id)
    del host.storage[record_key]
    back = restarted(host)
    writing, deleted = asyncio.Event(), asyncio.Event()
    write, remove = back.host.set_plugin_storage, back.host.delete_plugin_storage

    async def slow_write(key: str, value: bytes) -> None:
        if key == record_key:
            writing.set()
            for _ in range(1000):  # the save is slow: whatever may run meanwhile does
                if deleted.is_set():
                    break
                await asyncio.sleep(0)
        await write(key, value)

    async def delete_and_tell(key: str) -> None:
        await remove(key)
        if key == record_key:
            deleted.set()

    back.host.set_plugin_storage = slow_write  # type: ignore[method-assign]
    back.host.delete_plugin_storage = delete_and_tell  # type: ignore[method-assign]

    async def delete_while_saving() -> bool:
        await writing.wait()
        return await back.component.delete_document(KB, solar.document_id)

    _, ok = await asyncio.gather(back.retrieve(KB, "solar array kilowatts", settings={"search_mode": "vector"}),
                                 delete_while_saving())
    assert ok is True
    assert record_key not in host.storage
    again = restarted(host)
    for mode in ("vector", "keyword"):
        assert not any("42 kilowatts" in t for t in await again.texts(KB, "solar array kilowatts",
                                                                       settings={"search_mode": mode}))
