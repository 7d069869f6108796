"""After a restart the keyword index snapshot is read beside the hooks, not before the
first answer. Queries are answered from the vectors meanwhile; the read goes on across hooks
without reading anything twice, with a bounded number of storage calls in flight, and stops with
each hook (the SDK refuses host calls of a task that outlives its hook).

A "restart" is a new plugin over the same host (vector DB and plugin storage). Every storage call
takes 1 ms here, so a hook's own work ends before a snapshot of many parts is read.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

import lucidrag.state.store as store_module
from lucidrag import engine as engine_module
from lucidrag.state.snapshotload import READS_IN_FLIGHT
from lucidrag.state.storage_keys import file_record_key, index_segment_key, kb_prefix
from tests.conftest import Harness
from tests.test_scale_state import KB, ingest_manuals, state_of
from tests.test_state_runtime import restarted

OTHER = "kb-other"
# Only bounds how long a broken build waits before the test reports it; never met when it passes.
HANG_S = 60
PART = 256  # bytes per storage value: the 40-manual index is a few hundred parts of it


def is_index_part(key: str, **_: object) -> bool:
    return key.startswith(kb_prefix(KB) + "kw/seg/") and "#" in key


def index_values(host) -> int:
    return sum(1 for k in host.storage if k.startswith(kb_prefix(KB) + "kw/seg/"))


@pytest.fixture
async def big_index(persist_every_segment: None, harness: Harness, host, monkeypatch) -> Harness:
    """A 40-file KB whose index snapshot is many small values, and the plugin restarted over it.
    (Its segments are persisted as production persists big ones.)"""
    monkeypatch.setattr(store_module, "PART_SIZE", PART)
    monkeypatch.setattr(engine_module, "QUERY_LOAD_WAIT_S", 0.05)
    await ingest_manuals(harness)
    back = restarted(host)
    back.host.latency = 0.001
    return back


async def test_the_first_query_after_a_restart_does_not_wait_for_the_keyword_index(big_index: Harness):
    back = big_index
    back.host.hang("get_plugin_storage", when=is_index_part)  # the index's parts never arrive

    texts = await asyncio.wait_for(back.texts(KB, "Section 4 of manual 33: part PX-33-4 of pump model M33"), HANG_S)

    assert "manual 33" in texts[0], "answered from the vectors"
    assert state_of(back).loading and not state_of(back).loaded
    assert back.host.calls["get_plugin_storage"] < index_values(back.host)


async def test_the_index_is_read_across_queries_once_and_then_used(big_index: Harness, monkeypatch):
    back = big_index
    monkeypatch.setattr(engine_module, "QUERY_LOAD_WAIT_S", 0.0)
    values = index_values(back.host)
    queries = 0
    while not state_of(back).loaded:
        assert queries < 100, "the snapshot was never loaded"
        texts = await back.texts(KB, f"pump model M{queries % 40}")
        assert texts, "every query is answered while the index is read"
        queries += 1
        assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("load-index:")], \
            "the reading stops with its hook"
    assert queries > 1, "the snapshot was read beside several hooks, not before the first answer"
    index_reads = sum(n for k, n in back.host.reads.items() if k.startswith(index_segment_key(KB, "")))
    assert index_reads == values, "the reads a query has in flight when it is done are finished, not lost"
    assert not back.host.refused, "no host call was made after its hook had ended"
    assert "PX-33-4" in (await back.texts(KB, "PX-33-4", settings={"search_mode": "keyword", "top_k": 1}))[0]
    assert sum(n for k, n in back.host.reads.items() if k.startswith(index_segment_key(KB, ""))) == index_reads, \
        "the loaded index is not read again"


async def test_reads_stay_bounded_when_several_queries_run_at_once(big_index: Harness):
    back = big_index
    reading = {"now": 0, "peak": 0, "all": 0}
    real = back.host.get_plugin_storage

    async def counted(key: str) -> bytes:
        if not is_index_part(key):
            return await real(key)
        reading["now"] += 1
        reading["all"] += 1
        reading["peak"] = max(reading["peak"], reading["now"])
        try:
            return await real(key)
        finally:
            reading["now"] -= 1

    back.host.get_plugin_storage = counted  # type: ignore[method-assign]
    await asyncio.gather(*(back.texts(KB, f"pump model M{i}") for i in range(4)))
    await asyncio.gather(*(back.texts(KB, f"pump model M{i}") for i in range(4)))
    assert reading["all"] > READS_IN_FLIGHT, "the queries read the index beside them"
    assert reading["peak"] == READS_IN_FLIGHT, "four hooks read it, a few reads at a time in all"


async def test_a_keyword_query_waits_for_the_index(big_index: Harness):
    back = big_index
    texts = await back.texts(KB, "PX-33-4", settings={"search_mode": "keyword", "top_k": 1})
    assert "PX-33-4" in texts[0] and state_of(back).loaded


async def test_a_keyword_query_is_answered_by_vectors_when_the_index_does_not_come(big_index: Harness, monkeypatch,
                                                                                   caplog):
    back = big_index
    monkeypatch.setattr(engine_module, "KEYWORD_WAIT_S", 0.05)
    back.host.hang("get_plugin_storage", when=is_index_part)
    with caplog.at_level(logging.WARNING):
        response = await asyncio.wait_for(
            back.retrieve(KB, "Section 4 of manual 33: part PX-33-4 of pump model M33", settings={"search_mode": "keyword", "top_k": 3}), HANG_S)
    assert "manual 33" in response.results[0].content[0].text
    assert "answered by vector search" in caplog.text


async def test_a_delete_after_a_restart_waits_for_the_index_and_the_file_stays_deleted(big_index: Harness, host):
    back = big_index
    doc = next(m["file_id"] for m in host.vectors_of(KB) if "PX-33-" in m["text"])
    await back.texts(KB, "pump")  # the index is being read
    assert await back.component.delete_document(KB, doc) is True
    again = restarted(back.host)
    texts = await again.texts(KB, "PX-33-4", settings={"search_mode": "keyword"})
    assert not any("PX-33-4" in t for t in texts)


# ---------------------------------------------------------------- segments stored compressed
def stored_segments(host) -> dict[str, bytes]:
    """Each segment's stored value (its parts joined), by key."""
    from lucidrag.state.store import blob_head

    out = {}
    for key in [k for k in host.storage if k.startswith(index_segment_key(KB, "")) and "#" not in k]:
        head = blob_head(host.storage[key])
        out[key] = head if isinstance(head, bytes) else b"".join(host.storage[f"{key}#{n}"] for n in range(head))
    return out


@pytest.mark.usefixtures("persist_every_segment")
async def test_segments_are_stored_compressed(harness: Harness, host):
    from lucidrag.state.store import unpack_segment

    await ingest_manuals(harness)
    stored = stored_segments(host)
    raw = {k: unpack_segment(v) for k, v in stored.items()}
    assert all(v[:4] == b"LRSG" for v in raw.values())
    assert sum(map(len, stored.values())) < 0.8 * sum(map(len, raw.values()))


@pytest.mark.usefixtures("persist_every_segment")
async def test_segments_stored_raw_by_an_earlier_version_still_load(harness: Harness, host):
    from lucidrag.state.store import unpack_segment

    await ingest_manuals(harness)
    for key, value in stored_segments(host).items():
        for part in [k for k in host.storage if k.startswith(key + "#")]:
            del host.storage[part]
        host.storage[key] = b"Z" + unpack_segment(value)
    back = restarted(host)
    assert "PX-33-4" in (await back.texts(KB, "PX-33-4", settings={"search_mode": "keyword", "top_k": 1}))[0]
    assert state_of(back).snapshot.manifest_known and not state_of(back).to_index, "the snapshot was used"


@pytest.mark.usefixtures("persist_every_segment")
async def test_a_segment_that_does_not_decompress_costs_a_reindex_not_an_answer(harness: Harness, host):
    await ingest_manuals(harness)
    key = next(iter(stored_segments(host)))
    host.storage[key] = b"ZLRSZ" + b"not zlib" * 10
    for part in [k for k in host.storage if k.startswith(key + "#")]:
        del host.storage[part]
    back = restarted(host)
    assert "PX-33-4" in (await back.texts(KB, "PX-33-4", settings={"search_mode": "keyword", "top_k": 1}))[0]


async def test_a_file_whose_record_cannot_be_read_is_still_answered_while_the_index_is_read(big_index: Harness,
                                                                                            host):
    back = big_index
    doc = next(m["file_id"] for m in host.vectors_of(KB) if "manual 33:" in m["text"])
    back.host.hang("get_plugin_storage", when=is_index_part)
    back.host.fail("get_plugin_storage", when=lambda key, **_: key.endswith(doc))
    texts = await asyncio.wait_for(back.texts(KB, "Section 4 of manual 33: part PX-33-4 of pump model M33"), HANG_S)
    assert "manual 33" in texts[0], "answered from the vector's own metadata"
    assert state_of(back).loading


async def test_queries_on_another_kb_do_not_read_this_kbs_index(big_index: Harness):
    back = big_index
    back.host.hang("get_plugin_storage", when=is_index_part)
    await back.texts(KB, "pump model M1")
    assert state_of(back).loading
    back.host.hangs.clear()
    await back.ingest("kb-probe", "probe.txt", b"The pump impeller turns at 1450 rpm.")
    reads = sum(n for k, n in back.host.reads.items() if is_index_part(k))
    for _ in range(5):
        assert await back.texts("kb-probe", "impeller", settings={"search_mode": "keyword"})
    assert sum(n for k, n in back.host.reads.items() if is_index_part(k)) == reads


async def test_a_vector_query_does_not_wait_for_the_keyword_index(big_index: Harness, monkeypatch):
    back = big_index
    monkeypatch.setattr(engine_module, "QUERY_LOAD_WAIT_S", 600.0)  # what a hybrid query would wait
    back.host.hang("get_plugin_storage", when=is_index_part)
    texts = await asyncio.wait_for(back.texts(KB, "Section 4 of manual 33: part PX-33-4 of pump model M33",
                                              settings={"search_mode": "vector"}), HANG_S)
    assert "manual 33" in texts[0] and state_of(back).loading


async def test_a_kbs_reindexing_after_a_restart_does_not_hold_up_another_kbs_queries(harness: Harness, host):
    """Segments below segindex.PERSIST_POSTINGS are not in the snapshot: after a restart their
    files are indexed from their records by the KB's own queries. A query on another KB neither
    waits for that nor does it (the probe of bench/scale_real_host.py waited 2.6 s behind it)."""
    await ingest_manuals(harness, 8)  # all in the in-memory tail
    await harness.ingest(OTHER, "note.txt", b"The kettle descaling interval is 30 days.")
    back = restarted(host)
    record_reads = asyncio.Event()
    records_may_come = asyncio.Event()
    read = back.host.get_plugin_storage

    async def gated_read(key: str) -> bytes:
        if key.startswith(file_record_key(KB, "")):
            record_reads.set()
            await records_may_come.wait()
        return await read(key)

    back.host.get_plugin_storage = gated_read  # type: ignore[method-assign]
    own_query = asyncio.ensure_future(back.texts(KB, "pump model M3"))
    await asyncio.wait_for(record_reads.wait(), HANG_S)  # the KB's query is indexing its records
    texts = await asyncio.wait_for(back.texts(OTHER, "kettle descaling interval"), HANG_S)
    assert texts and "30 days" in texts[0]
    records_may_come.set()
    assert "manual 3" in (await asyncio.wait_for(own_query, HANG_S))[0]
    keyword = await back.texts(KB, "pump model M5", settings={"search_mode": "keyword"})
    assert keyword and "manual 5" in keyword[0], "the KB's own queries indexed its files"


async def test_a_hybrid_query_after_a_restart_does_not_wait_behind_the_kbs_reindexing(harness: Harness, host):
    """While one query of the KB indexes the files its snapshot lacks, another hybrid query is
    answered (from the vectors and what is indexed) instead of queueing behind it."""
    ids = await ingest_manuals(harness, 8)  # all in the in-memory tail: indexed from their records after a restart
    back = restarted(host)
    record_reads, records_may_come = asyncio.Event(), asyncio.Event()
    read = back.host.get_plugin_storage

    async def gated_read(key: str) -> bytes:
        if key.startswith(file_record_key(KB, ids[7])) and not record_reads.is_set():  # the indexing's read
            record_reads.set()
            await records_may_come.wait()
        return await read(key)

    back.host.get_plugin_storage = gated_read  # type: ignore[method-assign]
    keyword_query = asyncio.ensure_future(back.texts(KB, "pump model M5", settings={"search_mode": "keyword"}))
    await asyncio.wait_for(record_reads.wait(), HANG_S)  # the keyword query is indexing the records
    assert state_of(back).indexing
    task = asyncio.ensure_future(back.retrieve(KB, "Section 4 of manual 3: part PX-3-4 of pump model M3",
                                               settings={"top_k": 1}))
    done, _ = await asyncio.wait([task], timeout=HANG_S)
    records_may_come.set()
    assert done, "the hybrid query waited behind the keyword query's indexing"
    assert "manual 3" in task.result().results[0].content[0].text
    assert "manual 5" in (await asyncio.wait_for(keyword_query, HANG_S))[0]
