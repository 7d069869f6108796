"""A filtered query (lucidrag/retrieval/localfilter.py): what the vector backend is asked for, and
what plugin storage is read, so that every matching chunk is found on every backend.

A filter on `file_id` alone is answered from the keyword index (no record is read); one on chunk
metadata reads every file's record (only the named files' when it also names files) and asks the
backend for every vector of the files it selects.
The backend only ever gets `file_id` (one file) or `file_id $in` (several), which every LangBot
adapter takes. Written against the survivors of a mutation run of localfilter.py
(docs/TESTING.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from lucidrag.state import recordcache
from lucidrag.state.storage_keys import file_record_key
from tests.conftest import FakePlugin, Harness

KB = "kb-localfilter"
VECTOR = {"search_mode": "vector", "top_k": 3}


def restarted(host: FakePlugin) -> Harness:
    fresh = FakePlugin()
    fresh.collections, fresh.dims, fresh.storage = host.collections, host.dims, host.storage
    return Harness(fresh)


def record_searches(host: FakePlugin) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    real = host.vector_search

    async def vector_search(collection_id: str, query_vector: list[float], **kwargs: Any) -> list[dict[str, Any]]:
        calls.append({"collection_id": collection_id, **kwargs})
        return await real(collection_id, query_vector, **kwargs)

    host.vector_search = vector_search  # type: ignore[method-assign]
    return calls


def records_read(host: FakePlugin, file_ids: list[str]) -> set[str]:
    """Which of these files had their record read from plugin storage."""
    return {f for f in file_ids if any(key.startswith(file_record_key(KB, f)) for key in host.reads)}


async def three_files() -> tuple[FakePlugin, list[str], list[int]]:
    host = FakePlugin()
    harness = Harness(host)
    ids, sizes = [], []
    for name, paragraphs in (("a.txt", 25), ("b.txt", 30), ("c.txt", 1)):
        body = "\n\n".join(f"{name} paragraph {i}: pump P-{i} runs {i + 1} hours a day." for i in range(paragraphs))
        result = await harness.ingest(KB, name, body.encode(), settings={"chunk_size": 64, "chunk_overlap": 0})
        ids.append(result.document_id)
        sizes.append(len(host.vectors_of(KB, result.document_id)))
    assert sizes[0] > 1 and sizes[1] > sizes[0]
    return host, ids, sizes


@pytest.mark.usefixtures("persist_every_segment")  # a restart reads the index, not every record
async def test_a_filter_on_file_ids_reads_no_record_and_asks_the_backend_for_those_files_only():
    host, (a, b, c), _ = await three_files()
    for where, pushed in (({"file_id": a}, {"file_id": a}),
                          ({"$or": [{"file_id": a}, {"file_id": b}]}, {"file_id": {"$in": sorted([a, b])}}),
                          ({"$and": [{"file_id": {"$in": [a, b]}}, {"file_id": {"$ne": b}}]}, {"file_id": a})):
        back = restarted(host)
        searches = record_searches(back.host)
        response = await back.retrieve(KB, "pump hours", settings=VECTOR, filters=where)
        assert response.results and records_read(back.host, [a, b, c]) <= {a, b}, "only the hits' records"
        assert {r.metadata["file_id"] for r in response.results} <= {a, b}
        (search,) = searches
        assert search == {"collection_id": KB, "top_k": search["top_k"], "filters": pushed, "search_type": "vector",
                          "query_text": "", "vector_weight": None}, where
        unfiltered = record_searches(back.host)
        await back.retrieve(KB, "pump hours", settings=VECTOR)
        assert search["top_k"] == unfiltered[0]["top_k"], "as many candidates as without a filter"


async def test_a_filter_on_chunk_metadata_asks_for_every_vector_of_the_files_it_selects(monkeypatch: pytest.MonkeyPatch):
    host, (a, b, c), sizes = await three_files()
    monkeypatch.setattr(recordcache, "CACHE_BYTES", 1)  # the filter reads each record from plugin storage
    back = restarted(host)
    searches = record_searches(back.host)
    where = {"chunk_index": {"$lte": 1}}  # the first two chunks of a and b, the one chunk of c
    response = await back.retrieve(KB, "pump hours", settings={"search_mode": "vector", "top_k": 5}, filters=where)
    assert sorted((r.metadata["file_id"], r.metadata["chunk_index"]) for r in response.results) == sorted(
        [(a, 0), (a, 1), (b, 0), (b, 1), (c, 0)])
    assert [(s["filters"], s["top_k"]) for s in searches] == [({"file_id": {"$in": sorted([a, b, c])}}, sum(sizes))]
    assert records_read(back.host, [a, b, c]) == {a, b, c}


@pytest.mark.usefixtures("persist_every_segment")  # a restart reads the index, not every record
async def test_a_filter_on_one_file_and_its_pages_reads_that_files_record_only(monkeypatch: pytest.MonkeyPatch):
    """What the agent's search sends for "this file, from chunk/page n on": the records of the
    files it names are read, not those of every file in the KB."""
    host, (a, b, c), _ = await three_files()
    monkeypatch.setattr(recordcache, "CACHE_BYTES", 1)
    for where, named in (({"$and": [{"file_id": a}, {"chunk_index": {"$gte": 1}}]}, {a}),
                         ({"$and": [{"file_id": {"$in": [a, b]}}, {"chunk_index": {"$gte": 1}}]}, {a, b}),
                         ({"$or": [{"$and": [{"file_id": a}, {"chunk_index": 1}]},
                                   {"$and": [{"file_id": b}, {"chunk_index": 2}]}]}, {a, b})):
        back = restarted(host)
        response = await back.retrieve(KB, "pump hours", settings=VECTOR, filters=where)
        assert response.results and {r.metadata["file_id"] for r in response.results} <= named
        assert records_read(back.host, [a, b, c]) == named, where
    back = restarted(host)  # a branch of an $or without a file may match any file
    await back.retrieve(KB, "pump hours", settings=VECTOR,
                        filters={"$or": [{"file_id": a}, {"chunk_index": 0}]})
    assert records_read(back.host, [a, b, c]) == {a, b, c}
