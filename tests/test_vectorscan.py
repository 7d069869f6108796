"""Reading back what the vector DB holds (lucidrag/vectors/vectorscan.py) on a Milvus-like host,
which refuses a listing past offset + limit = 16384: a file's vectors by offset pages while the
window allows and by id after it, and every file of a collection found one page per step.

The window is shrunk to 12 and a page to 4 here. Written against the survivors of a mutation run of
vectorscan.py (docs/TESTING.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from lucidrag.state.records import chunk_uuid, file_vector_count
from lucidrag.vectors import vectorscan
from lucidrag.vectors.vectorscan import FileDiscovery, file_vectors
from tests.conftest import FakePlugin, Harness
from tests.test_state_runtime import restarted

KB = "kb-scan"
PAGE, WINDOW = 4, 12


@pytest.fixture(autouse=True)
def small_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vectorscan, "LIST_PAGE", PAGE)
    monkeypatch.setattr(vectorscan, "LIST_WINDOW", WINDOW)


def record_listings(host: FakePlugin) -> list[tuple[Any, int, int]]:
    calls: list[tuple[Any, int, int]] = []
    real = host.vector_list

    async def vector_list(collection_id: str, filters: dict[str, Any] | None = None, limit: int = 20,
                          offset: int = 0) -> dict[str, Any]:
        calls.append((filters, limit, offset))
        return await real(collection_id, filters=filters, limit=limit, offset=offset)

    host.vector_list = vector_list  # type: ignore[method-assign]
    return calls


async def ingest(harness: Harness, name: str, chunks: int) -> str:
    body = "\n\n".join(f"{name} part {i}: widget W{i} weighs {i} grams." for i in range(chunks))
    result = await harness.ingest(KB, name, body.encode(), settings={"chunk_size": 64, "chunk_overlap": 0})
    assert len(harness.host.vectors_of(KB, result.document_id)) == file_vector_count(chunks)
    return result.document_id


async def test_a_file_past_the_listing_window_is_read_by_id_after_it():
    host = FakePlugin.milvus(list_window=WINDOW)
    harness = Harness(host)
    file_id = await ingest(harness, "big.txt", 30)
    ids = [chunk_uuid(file_id, i) for i in range(30)]
    calls = record_listings(host)
    items = await harness.invoke(file_vectors, host, KB, file_id, ids)
    assert sorted(str(i["id"]) for i in items) == sorted(ids)  # each once
    listed = [str(i["id"]) for i in items[:WINDOW]]
    by_id = sorted(set(ids) - set(listed))
    assert calls == [({"file_id": file_id}, PAGE, 0), ({"file_id": file_id}, PAGE, 4), ({"file_id": file_id}, PAGE, 8)] + [
        ({"uuid": {"$in": [c for c in ids if c in by_id][n : n + PAGE]}}, PAGE, 0) for n in range(0, len(by_id), PAGE)]
    # without the chunk ids, what the window holds
    assert len(await harness.invoke(file_vectors, host, KB, file_id)) == WINDOW


async def test_a_file_past_the_window_whose_chunk_count_is_unknown_is_read_whole_by_its_ids():
    host = FakePlugin.milvus(list_window=WINDOW)
    harness = Harness(host)
    file_id = await ingest(harness, "big.txt", 30)
    calls = record_listings(host)
    items = await harness.invoke(lambda: file_vectors(host, KB, file_id, chunk_id_at=lambda i: chunk_uuid(file_id, i)))
    assert sorted(str(i["id"]) for i in items) == sorted(chunk_uuid(file_id, i) for i in range(30))
    by_id = [c for c in calls if "uuid" in (c[0] or {})]
    # the ids after the window, then one page of ids past the file's last chunk, and no more
    assert len(by_id) <= (30 - WINDOW) // PAGE + 2
    assert by_id[-1][0]["uuid"]["$in"] == [chunk_uuid(file_id, i) for i in range(32, 36)]


async def test_rebuilding_a_file_past_the_window_from_the_vector_db_keeps_every_chunk():
    host = FakePlugin.milvus(list_window=WINDOW)
    harness = Harness(host)
    await ingest(harness, "big.txt", 30)
    last_words = "widget W29 weighs"
    assert await harness.texts(KB, last_words, settings={"search_mode": "keyword"})
    state = harness.host.engine.installation("dedicated").kb(KB)
    assert await harness.invoke(state.rebuild_from_vector_db, host, KB)
    assert any("W29" in t for t in await harness.texts(KB, last_words, settings={"search_mode": "keyword"}))
    back = restarted(host)
    assert any("W29" in t for t in await back.texts(KB, last_words, settings={"search_mode": "keyword"}))


async def test_every_file_of_a_collection_is_found_one_listing_page_per_step_past_the_window():
    host = FakePlugin.milvus(list_window=WINDOW)
    harness = Harness(host)
    files = [await ingest(harness, f"f{i}.txt", 3) for i in range(8)]  # 32 vectors (24 chunks, 8 document vectors): past the window
    calls = record_listings(host)
    discovery = FileDiscovery()
    found: list[set[str]] = []
    while not discovery.done:
        found.append(await harness.invoke(discovery.step, host, KB))
        assert len(found) < 20
    assert discovery.known == set(files) and set().union(*found) == set(files)
    assert sum(len(f) for f in found) == len(files), "each file reported once"
    assert [c[1:] for c in calls[:3]] == [(PAGE, 0), (PAGE, 4), (PAGE, 8)] and all(c[0] is None for c in calls[:3])
    known: set[str] = set()
    for (filters, limit, offset), new in zip(calls, found):
        if filters is not None:  # past the window: the files not found yet, from offset 0
            assert (filters, limit, offset) == ({"file_id": {"$nin": sorted(known)}}, PAGE, 0)
        known |= new
    assert found[-1] == set() and len(calls) == len(found)
