"""Issue 17's defects in the file lifecycle that a random history reaches too rarely: each test
failed on main at 49f9afa (what went wrong is in its docstring)."""

from __future__ import annotations

from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from lucidrag.index.segindex import SegmentIndex
from lucidrag.state.records import chunk_uuid
from lucidrag.state.storage_keys import index_manifest_key, index_segment_key
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
    await harness.retrieve(KB, "pump pressure")  # the restart's hooks reconcile the journal entry
    assert host.vector_count(KB) == count
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
