"""KB state survives crashes, restarts and failing plugin storage; filters find what matches;
CPU work stays off the event loop; bulk uploads do not list storage once per file.

A "restart" is a new Harness (new plugin object, new Engine) over the same vector DB and storage.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from lucidrag.state.storage_keys import index_manifest_key, index_segment_key
from tests.conftest import FakePlugin, Harness
import lucidrag.ingestion.ingest as ingest_module
import lucidrag.state.kbcore as kbcore
from lucidrag.index.segindex import SegmentIndex
from lucidrag.state.records import FileRecord
from lucidrag.state.storage_keys import file_record_key
from lucidrag.state.store import KbStore, list_keys

KB = "kb-runtime-1"
TEA = b"Oolong tea is partially oxidised. The Tieguanyin cultivar comes from Anxi in Fujian."
SOLAR = b"The solar array on building C produces 42 kilowatts at noon in June."


class Crash(BaseException):
    """The plugin process dies: nothing after this point runs (no rollback, no bookkeeping)."""


def restarted(host: FakePlugin) -> Harness:
    """A new plugin process over the same LangBot host (vector DB and plugin storage)."""
    fresh = FakePlugin(metric=host.metric, keep_metadata=host.keep_metadata,
                       required_metadata=host.required_metadata, strip_filters=host.strip_filters,
                       default_dim=host.default_dim, list_window=host.list_window)
    fresh.collections, fresh.dims, fresh.storage = host.collections, host.dims, host.storage
    return Harness(fresh)


def long_text(paragraphs: int) -> bytes:
    return "\n\n".join(
        f"Paragraph {i}: component QX-{i} is inspected every {i % 12 + 1} weeks by team {i % 5}."
        for i in range(paragraphs)
    ).encode()


async def crash_during_upsert(harness: Harness, data: bytes) -> str:
    """Ingest `data`; the process dies after the first upsert batch was written."""
    host = harness.host
    real = host.vector_upsert
    calls = 0

    async def upsert(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls == 2:
            for name in ("vector_delete", "set_plugin_storage", "delete_plugin_storage", "vector_upsert"):
                host.fail(name, error=Crash())  # a dead process makes no further calls
            raise Crash()
        return await real(*args, **kwargs)

    host.vector_upsert = upsert  # type: ignore[method-assign]
    document_id = "doc-crashed"
    with pytest.raises(Crash):
        await harness.component.ingest(_context(harness, data, document_id))
    return document_id


def _context(harness: Harness, data: bytes, document_id: str):
    from langbot_plugin.api.entities.builtin.rag.models import (
        FileMetadata,
        FileObject,
        IngestionContext,
    )

    from tests.conftest import MODEL

    path = f"v1/{KB}/{document_id}.txt"
    harness.host.files[path] = data
    return IngestionContext(
        file_object=FileObject(metadata=FileMetadata(filename=path, file_size=len(data), mime_type="",
                                                     document_id=document_id, knowledge_base_id=KB),
                               storage_path=path),
        knowledge_base_id=KB, collection_id=KB,
        creation_settings={"embedding_model_uuid": MODEL, "chunk_size": 128, "chunk_overlap": 0},
    )


async def test_a_crash_mid_upsert_leaves_no_orphan_vectors_once_the_plugin_is_back(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    crashed = await crash_during_upsert(harness, long_text(400))
    assert host.vectors_of(KB, crashed), "the first batch was written before the crash"

    back = restarted(host)
    texts = await back.texts(KB, "How often is component QX-7 inspected?", settings={"top_k": 10})
    assert not any("QX-" in t for t in texts), "an interrupted ingest's vectors are not answers"
    assert host.vectors_of(KB, crashed) == [], "the next invocation after the restart removed the orphans"
    assert "Tieguanyin" in (await back.texts(KB, "Where does Tieguanyin come from?"))[0]
    assert not [k for k in host.storage if "journal" in k]


async def test_an_ingest_that_finished_but_lost_its_bookkeeping_is_adopted_after_a_restart(harness: Harness, host):
    """The vectors were all written, then the record save failed and the process restarted: the
    journal entry shows a complete file, which is adopted, not deleted."""
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("set_plugin_storage", when=lambda key: "/file/" in key)  # records cannot be saved
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    assert solar.status == DocumentStatus.COMPLETED
    host.faults.clear()

    back = restarted(host)
    texts = await back.texts(KB, "solar array kilowatts", settings={"search_mode": "keyword"})
    assert texts and "42 kilowatts" in texts[0]
    assert host.vectors_of(KB, solar.document_id)


async def test_an_ingest_whose_record_cannot_be_saved_fails_instead_of_vanishing_at_the_next_restart(harness: Harness, host):
    """COMPLETED means a restart still knows the file. Storage already names other
    files (so a restart trusts it) and now fails every write: no record, no journal entry."""
    await harness.ingest(KB, "tea.txt", TEA)
    back = restarted(host)
    back.host.fail("set_plugin_storage")
    solar = await back.ingest(KB, "solar.txt", SOLAR)
    assert solar.status == DocumentStatus.FAILED and "plugin storage" in solar.error_message
    assert {m["file_id"] for m in host.vectors_of(KB)} == {next(iter(host.vectors_of(KB)))["file_id"]}
    back.host.faults.clear()
    again = restarted(host)
    assert await again.texts(KB, "solar array kilowatts", settings={"search_mode": "keyword"}) == []
    solar = await again.ingest(KB, "solar.txt", SOLAR)  # uploaded again once storage works
    assert "42 kilowatts" in (await restarted(host).texts(KB, "solar array kilowatts",
                                                           settings={"search_mode": "keyword"}))[0]


async def test_an_ingest_whose_journal_entry_cannot_be_written_writes_no_vector(harness: Harness, host):
    """A vector no durable entry names outlives a failed rollback and a restart (nothing
    would remove it, and a restart that finds no records adopts it: a FAILED file answered). So
    the journal entry comes before the first vector, or the ingest fails with nothing written."""
    await harness.ingest(KB, "tea.txt", TEA)
    deletes = host.calls["vector_delete"]
    host.fail("set_plugin_storage", when=lambda key, **_: "/journal/" in key)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    assert solar.status == DocumentStatus.FAILED and "plugin storage" in solar.error_message
    assert not host.vectors_of(KB, solar.document_id)
    assert host.calls["vector_delete"] == deletes  # nothing to roll back
    host.faults.clear()
    again = await harness.ingest(KB, "solar.txt", SOLAR)  # uploaded again once storage works
    assert again.status == DocumentStatus.COMPLETED
    assert "42 kilowatts" in (await restarted(host).texts(KB, "solar array kilowatts"))[0]


async def test_a_first_ingest_whose_journal_entry_cannot_be_written_writes_no_vector(harness: Harness, host):
    """Only a KB of which storage holds nothing at all (not even the meta its creation wrote)
    takes the vector DB for the truth after a restart; a new KB holds its meta, so its first
    ingest needs the journal entry too: else a failed rollback left vectors that, after a
    restart, were stray for good (or adopted)."""
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    host.fail("set_plugin_storage", when=lambda key, **_: "/journal/" in key)
    host.fail("vector_delete")  # a rollback would fail too
    failed = await harness.ingest(KB, "solar.txt", SOLAR)
    assert failed.status == DocumentStatus.FAILED and "plugin storage" in failed.error_message
    assert host.vector_count(KB) == 0


async def test_a_first_ingest_that_cannot_clear_the_new_kb_mark_fails_and_leaves_the_kb_usable(harness: Harness, host):
    """With "never had a vector" stored and not clearable, a restart would take the KB
    for empty and never look at the file's vectors: the ingest fails instead of a lost COMPLETED."""
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    host.fail("set_plugin_storage")
    failed = await harness.ingest(KB, "solar.txt", SOLAR)
    assert failed.status == DocumentStatus.FAILED and host.vector_count(KB) == 0
    host.faults.clear()
    await harness.ingest(KB, "solar.txt", SOLAR)
    back = restarted(host)
    texts = await back.texts(KB, "How many kilowatts does the solar array produce?")
    assert texts and "42 kilowatts" in texts[0]


async def test_a_file_id_filter_in_keyword_mode_finds_the_file_however_many_others_match_better(harness: Harness):
    for i in range(70):
        await harness.ingest(KB, f"pump{i}.txt", f"Pump P{i}: pressure valve pressure valve pressure check.".encode())
    target = await harness.ingest(KB, "manual.txt", b"The pressure of the boiler is read daily.")
    texts = await harness.texts(KB, "pressure valve", settings={"search_mode": "keyword", "source_line": False},
                                filters={"file_id": target.document_id})
    assert texts == ["The pressure of the boiler is read daily."]


async def test_a_chunk_level_filter_finds_a_chunk_ranked_past_a_thousand(harness: Harness, host):
    await harness.ingest(KB, "parts.txt", long_text(1300), settings={"chunk_size": 64, "chunk_overlap": 0})
    chunks = [v for v in host.vectors_of(KB) if "chunk_index" in v]  # not the file's document vector
    assert len(chunks) > 1100
    wanted = max(chunks, key=lambda c: c["chunk_index"])
    texts = await harness.texts(KB, "solar panels on the roof",  # any question: the filter picks the chunk
                                settings={"search_mode": "vector", "source_line": False, "relevance_cut": "off"},
                                filters={"chunk_index": wanted["chunk_index"]})
    assert texts == [wanted["text"]]


async def test_bulk_uploads_into_an_unloaded_kb_list_plugin_storage_once_not_per_file(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    back = restarted(host)
    before = back.host.calls["get_plugin_storage_keys"]
    for i in range(20):
        await back.ingest(KB, f"note{i}.txt", f"Note {i} mentions gadget G{i}.".encode())
    assert back.host.calls["get_plugin_storage_keys"] - before <= 2


# What production runs off the event loop (`run_blocking`): the keyword index (segment index),
# tokenising, record decoding, rebuilding records from vectors and building a file's record
# (parsing and chunking run in another process: tests/test_parse_workers.py). Each is watched where the production module
# looks it up.
WATCHED = {
    SegmentIndex: ("add_file", "remove_file", "search", "take_changes", "load"),
    FileRecord: ("from_vector_items",),
    kbcore: ("decode_record", "tokenize_chunks"),
    ingest_module: ("file_record",),
}


def _on_the_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def watch_cpu_work(monkeypatch) -> tuple[Counter, Counter]:
    """Count calls of the watched functions, and those made on the event loop's thread."""
    calls: Counter = Counter()
    on_loop: Counter = Counter()
    for owner, names in WATCHED.items():
        for name in names:
            original = getattr(owner, name)

            def wrapper(*args, _original=original, _name=name, **kwargs):
                calls[_name] += 1
                if _on_the_event_loop():
                    on_loop[_name] += 1
                return _original(*args, **kwargs)
            is_classmethod = isinstance(owner, type) and isinstance(owner.__dict__.get(name), classmethod)
            monkeypatch.setattr(owner, name, classmethod(lambda cls, *a, _w=wrapper, **k: _w(*a, **k))
                                if is_classmethod else wrapper)
    return calls, on_loop


@pytest.mark.usefixtures("persist_every_segment")
async def test_loading_indexing_searching_and_deleting_run_off_the_event_loop(harness: Harness, host, monkeypatch):
    for i in range(6):
        await harness.ingest(KB, f"f{i}.txt", long_text(30) + f" file {i}".encode())
    listed = {v["file_id"] for v in host.vectors_of(KB)}
    lost_record = sorted(listed)[0]
    del host.storage[file_record_key(KB, lost_record)]
    calls, on_loop = watch_cpu_work(monkeypatch)

    back = restarted(host)  # loads the snapshot, decodes records, rebuilds the lost one from vectors
    assert await back.texts(KB, "component QX-7", settings={"search_mode": "keyword"})
    assert await back.texts(KB, "component QX-7", settings={"search_mode": "vector", "top_k": 50})
    await back.component.delete_document(KB, sorted(listed)[1])
    await back.ingest(KB, "extra.txt", TEA)
    for key in [k for k in host.storage if "/kw/" in k]:
        del host.storage[key]  # no snapshot: the next process indexes every file from its record
    again = restarted(host)
    assert "Tieguanyin" in (await again.texts(KB, "Tieguanyin cultivar", settings={"search_mode": "keyword"}))[0]

    every_name = {name for names in WATCHED.values() for name in names}
    assert set(calls) == every_name, f"not exercised: {every_name - set(calls)}"
    assert on_loop == Counter(), "CPU work ran on the event loop"


async def test_repair_rebuilds_a_kb_whose_records_storage_lost(harness: Harness, host):
    await harness.ingest(KB, "solar.txt", SOLAR)
    for key in [k for k in host.storage if "/file/" in k]:
        del host.storage[key]
    host.storage.pop(index_manifest_key(KB))
    back = restarted(host)
    state = back.host.engine.installation("dedicated").kb(KB)
    assert await state.rebuild_from_vector_db(back.host, KB) == 1
    assert "42 kilowatts" in (await back.texts(KB, "solar array kilowatts"))[0]
    assert "42 kilowatts" in (await restarted(host).texts(KB, "solar array kilowatts"))[0]


async def test_a_kb_whose_records_are_all_in_memory_is_not_rebuilt_from_the_vector_db(harness: Harness, host):
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    await harness.ingest(KB, "solar.txt", SOLAR)
    await harness.retrieve(KB, "solar array")
    assert host.calls["vector_list"] == 0


@pytest.mark.usefixtures("persist_every_segment")
async def test_a_segment_written_before_its_manifest_is_never_deleted_as_an_orphan(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    back = restarted(host)
    back.host.fail("get_plugin_storage_keys")  # the load's listing fails: which keys exist is unknown
    await back.retrieve(KB, "tea")
    back.host.fail("set_plugin_storage", when=lambda key, **_: key.endswith("kw/manifest"))
    await back.ingest(KB, "solar.txt", SOLAR)  # its segment is stored, the manifest naming it is not
    back.host.faults.clear()
    state = back.host.engine.installation("dedicated").kb(KB)

    async def listing_then_flush() -> None:  # a later hook learns the keys, then retries the writes
        state.seed(await list_keys(back.host))
        await state.flush(KbStore(back.host, KB), math.inf)

    await back.invoke(listing_then_flush)
    named = SegmentIndex.manifest_segment_names(host.storage[index_manifest_key(KB)])
    assert [n for n in named if index_segment_key(KB, n) not in host.storage] == [], \
        "the stored manifest names a segment that was deleted"
    assert await restarted(host).texts(KB, "solar array kilowatts", settings={"search_mode": "keyword"})
