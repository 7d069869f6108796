"""No plugin-storage key outlives what references it. Big values are stored in parts
(`<key>#n` plus a header naming their count); a part must go when its value goes, when the value is
re-saved in fewer parts, and when a crash left it without a header."""

from __future__ import annotations

import pytest

from lucidrag.state.records import ChunkRecord, FileRecord
from lucidrag.state.storage_keys import file_record_key, index_segment_key, kb_prefix
from lucidrag.state.store import KbStore
from tests.conftest import Harness
from tests.fakes import HostError
from tests.test_state_runtime import restarted

KB = "kb-leaks"
PART = 256  # bytes per part here, so that an ordinary record is stored in several


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("lucidrag.state.store.PART_SIZE", PART)


def record(file_id: str, chunks: int) -> FileRecord:
    # text that zlib cannot shrink much, so the record's size follows the chunk count
    return FileRecord(file_id, "txt", [
        ChunkRecord(f"{file_id}-{i}", file_id, i, f"chunk {i}: " + " ".join(str(i * 7919 + j * 104729) for j in range(40)))
        for i in range(chunks)
    ])


def keys_of(host, file_id: str) -> list[str]:
    return sorted(k for k in host.storage if k.startswith(file_record_key(KB, file_id)))


def manual(paragraphs: int) -> bytes:
    return "\n\n".join(f"Valve VX-{i} of the cooling loop is opened {i % 9 + 1} turns." for i in range(paragraphs)).encode()


async def test_a_record_saved_again_in_fewer_parts_leaves_none_of_the_old_parts(harness: Harness, host):
    store = KbStore(host, KB)

    async def save(r: FileRecord) -> bool:
        return await store.save_record(r)

    def parts(r: FileRecord) -> int:
        return -(-len(r.to_bytes()) // PART)

    big, smaller = record("f1", 40), record("f1", 12)
    assert 1 < parts(smaller) < parts(big)
    assert await harness.invoke(save, big)
    assert len(keys_of(host, "f1")) == 1 + parts(big)  # header + parts
    assert await harness.invoke(save, smaller)
    assert len(keys_of(host, "f1")) == 1 + parts(smaller)
    assert await harness.invoke(save, FileRecord("f1", "txt", [ChunkRecord("f1-0", "f1", 0, "short")]))
    assert keys_of(host, "f1") == [file_record_key(KB, "f1")]  # a single value: no part left
    loaded = await harness.invoke(store.load_record, "f1")
    assert loaded is not None and len(loaded.chunks) == 1


async def test_a_delete_whose_header_read_fails_leaves_nothing_once_storage_is_back(harness: Harness, host):
    result = await harness.ingest(KB, "valves.txt", manual(80), settings={"chunk_size": 128, "chunk_overlap": 0})
    file_id = result.document_id
    assert len(keys_of(host, file_id)) > 2

    host.fail("get_plugin_storage")  # storage answers no read while the file is deleted
    # its record is still stored, and its journal entry makes a restart remove it
    assert await harness.component.delete_document(KB, file_id) is True
    host.faults.clear()
    await harness.retrieve(KB, "valve")  # a later request deletes the record, then the entry

    assert keys_of(host, file_id) == []


async def test_parts_a_crash_left_without_their_header_are_removed_after_a_restart(harness: Harness, host):
    await harness.ingest(KB, "valves.txt", manual(20), settings={"chunk_size": 128, "chunk_overlap": 0})
    # A process died after writing parts of a record and of an index segment, before their headers.
    strays = [f"{file_record_key(KB, 'died-here')}#0", f"{file_record_key(KB, 'died-here')}#1",
              f"{index_segment_key(KB, 'dead.000001')}#0"]
    for key in strays:
        host.storage[key] = b"x" * PART
    live = sorted(k for k in host.storage if k.startswith(kb_prefix(KB)) and k not in strays)

    back = restarted(host)
    unlogged = {"query_log": "off"}  # the question log is written beside queries
    assert "VX-4" in " ".join(await back.texts(KB, "valve VX-4", settings={"search_mode": "keyword", **unlogged}))
    await back.texts(KB, "valve VX-5", settings=unlogged)

    assert sorted(k for k in host.storage if k.startswith(kb_prefix(KB))) == live


async def test_a_part_whose_header_is_written_meanwhile_is_kept(harness: Harness, host):
    """The listing is old by the time upkeep runs: a value completed since then keeps its parts."""
    store = KbStore(host, KB)
    assert await harness.invoke(store.save_record, record("f2", 40))
    part = f"{file_record_key(KB, 'f2')}#0"

    assert await harness.invoke(store.delete_stray_part, part)
    assert part in host.storage
    assert (await harness.invoke(store.load_record, "f2")) is not None


async def test_a_failed_header_read_keeps_the_stray_part_for_a_later_try(harness: Harness, host):
    store = KbStore(host, KB)
    part = f"{file_record_key(KB, 'gone')}#0"
    host.storage[part] = b"x"
    host.fail("get_plugin_storage", error=HostError("database is locked"))
    assert not await harness.invoke(store.delete_stray_part, part)
    assert part in host.storage
    host.faults.clear()
    assert await harness.invoke(store.delete_stray_part, part)
    assert part not in host.storage
