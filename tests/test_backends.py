"""The engine behaves the same on every LangBot vector backend.

`FakeHost.milvus()` reproduces what LangBot 4.11.2's Milvus adapter does (tests/fakes.py): COSINE
similarity as distance, only text / file_id / uuid kept, an insert without `uuid` refused, filter
clauses on other keys and `$and`/`$or` silently dropped, a missing collection created with
dimension 1536 by any search/list/delete, and no query past offset + limit = 16384.
"""

from __future__ import annotations

from typing import Any

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from lucidrag.state.storage_keys import pending_kb_delete_key
from lucidrag.vectors import vectorscan
from lucidrag.vectors.scoring import Metric
from tests import samples
from tests.conftest import FakePlugin, Harness

KB = "kb-backends"
GUIDE = (b"# Pump guide\n\n## Install\n\nBolt the Zorblatt pump to the frame with four M8 bolts.\n\n"
         b"## Maintain\n\nGrease the Zorblatt bearings every 300 hours of running.\n\n"
         b"## Retire\n\nDrain the Zorblatt oil before scrapping the pump.\n")
SOLAR = b"The solar array on building C produces 42 kilowatts at noon in June."


def backends() -> dict[str, FakePlugin]:
    return {
        "chroma": FakePlugin(),
        "milvus": FakePlugin.milvus(),
        "pgvector": FakePlugin(metric="cosine_distance", keep_metadata=("text", "file_id")),
    }


def pdf() -> bytes:
    return samples.pdf_bytes([["Page one is about the Vantablue glacier and its ice."],
                              ["Page two says the Vantablue glacier advanced 40 metres in 1887."]])


@pytest.mark.parametrize("name", ["chroma", "milvus", "pgvector"])
async def test_the_same_journey_gives_the_same_answers_on_each_backend(name: str):
    """Fix: `uuid` in the metadata (Milvus refuses an insert without it)."""
    host = backends()[name]
    h = Harness(host)
    guide = await h.ingest(KB, "guide.md", GUIDE, settings={"chunk_size": 64, "chunk_overlap": 0})
    report = await h.ingest(KB, "glacier.pdf", pdf())
    await h.ingest(KB, "solar.txt", SOLAR)
    assert guide.status == report.status == DocumentStatus.COMPLETED, (guide, report)

    top = (await h.retrieve(KB, "glacier advanced 40 metres in 1887")).results[0]
    assert "40 metres" in top.content[0].text
    assert top.metadata["page"] == 2 and "p. 2" in top.metadata["citation"]  # citation from the record

    hit = (await h.retrieve(KB, "grease bearings hours", settings={"top_k": 1})).results[0]
    assert hit.metadata["heading"].endswith("Maintain")
    window = (await h.retrieve(KB, "grease bearings hours", settings={"top_k": 1, "context_window": 1})).results[0]
    text = window.content[0].text
    assert "M8 bolts" in text and "300 hours" in text and "Drain" in text  # neighbours from the record

    assert await h.component.delete_document(KB, report.document_id) is True
    for mode in ("hybrid", "vector", "keyword"):
        texts = await h.texts(KB, "Vantablue glacier", settings={"search_mode": mode, "top_k": 20})
        assert not any("Vantablue" in t for t in texts)
    await h.component.on_knowledge_base_delete(KB)
    assert host.vector_count(KB) == 0 and not any(KB in k for k in host.storage)


async def test_parent_child_passages_survive_a_backend_that_drops_metadata():
    h = Harness(FakePlugin.milvus())
    body = "\n\n".join(f"Fact {i}: the Quenby valve number {i} opens at {i * 3} bar." for i in range(12))
    await h.ingest(KB, "valves.txt", body.encode(), settings={"chunking": "parent_child", "chunk_size": 64,
                                                             "chunk_overlap": 0})
    text = (await h.texts(KB, "Quenby valve number 7", settings={"top_k": 1}))[0]
    assert "number 7 opens at 21 bar" in text and len(text) > 100  # the parent, not the 64-char child


@pytest.mark.parametrize("name", ["chroma", "milvus", "pgvector"])
async def test_filters_on_any_key_work_even_where_the_backend_drops_them(name: str):
    """Fix: engine.LocalFilterHost (Milvus ignored `page`, `format` and `$and` silently)."""
    h = Harness(backends()[name])
    report = await h.ingest(KB, "glacier.pdf", pdf())
    solar = await h.ingest(KB, "solar.txt", SOLAR)
    for where in ({"page": 1}, {"page": {"$gte": 2}}, {"format": "pdf", "page": 1},
                  {"$or": [{"page": 2}, {"file_id": solar.document_id}]}):
        results = (await h.retrieve(KB, "Vantablue glacier solar kilowatts", filters=where,  # no file answers all of it
                                    settings={"top_k": 10, "search_mode": "vector", "relevance_cut": "off"})).results
        expected = {1: [(report.document_id, 1)], 2: [(report.document_id, 2)]}
        got = sorted((r.metadata["file_id"], r.metadata["page"]) for r in results)
        if "$or" in where:
            assert got == sorted([(report.document_id, 2), (solar.document_id, 0)]), (where, got)
        elif where.get("page") == 1:
            assert got == expected[1], (where, got)
        else:
            assert got == expected[2], (where, got)
    only_solar = (await h.retrieve(KB, "glacier", filters={"file_id": solar.document_id},
                                   settings={"relevance_cut": "off"})).results  # solar.txt does not answer it
    assert only_solar and all(r.metadata["file_id"] == solar.document_id for r in only_solar)


async def test_one_score_threshold_means_the_same_on_each_backend():
    scores = {}
    for name, host in backends().items():
        h = Harness(host)
        await h.ingest(KB, "guide.md", GUIDE)
        await h.ingest(KB, "solar.txt", SOLAR)
        state = host.engine.installation("dedicated").kb(KB)
        results = (await h.retrieve(KB, "solar array kilowatts", settings={"search_mode": "vector"})).results
        scores[name] = [round(r.score, 6) for r in results]
        expected = {"chroma": Metric.SQUARED_L2, "milvus": Metric.SIMILARITY, "pgvector": Metric.COSINE_DISTANCE}
        assert state.metric is expected[name]
    assert scores["chroma"] == scores["milvus"] == scores["pgvector"], scores


async def test_a_query_before_the_first_upload_does_not_break_a_milvus_kb():
    """Fix: a KB created through the engine is `fresh` -- no search/list before its first upsert,
    and no delete-before-upsert for a document id never seen (each creates a 1536-dim collection)."""
    host = FakePlugin.milvus()
    h = Harness(host)
    await host.engine.create_knowledge_base(host, "dedicated", KB)
    assert (await h.retrieve(KB, "anything")).results == []
    result = await h.ingest(KB, "solar.txt", SOLAR)
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    assert host.dims[KB] == len(host.embed_fn("x"))
    assert "42 kilowatts" in (await h.texts(KB, "solar kilowatts"))[0]


async def test_first_ingest_into_a_new_milvus_kb_succeeds_without_a_create_hook():
    host = FakePlugin.milvus()
    result = await Harness(host).ingest(KB, "solar.txt", SOLAR)
    assert result.status == DocumentStatus.COMPLETED, result.error_message


async def test_deleting_a_kb_that_never_had_a_vector_creates_no_collection():
    host = FakePlugin.milvus()
    await host.engine.create_knowledge_base(host, "dedicated", KB)
    await Harness(host).component.on_knowledge_base_delete(KB)
    assert KB not in host.collections and not host.storage


async def test_rebuild_and_kb_delete_page_past_the_milvus_query_window(monkeypatch):
    """Fix: vectorscan.FileDiscovery and the KB-delete scan never ask for offset + limit > 16384
    (window shrunk to 1000 here)."""
    monkeypatch.setattr(vectorscan, "LIST_WINDOW", 1000)
    host = FakePlugin.milvus(list_window=1000)
    host.fail("set_plugin_storage")  # no records: everything must come from the vector DB
    h = Harness(host)
    ids = []
    for i in range(30):
        body = "\n\n".join(f"Doc {i} part {j}: widget W{i}-{j} weighs {j} grams." for j in range(60))
        ids.append((await h.ingest(KB, f"d{i}.txt", body.encode(), settings={"chunk_size": 64,
                                                                             "chunk_overlap": 0})).document_id)
    total = host.vector_count(KB)
    assert total > 1500
    host.faults.clear()
    fresh = Harness(FakePlugin.milvus(list_window=1000))
    fresh.host.collections, fresh.host.dims = host.collections, host.dims
    texts = await fresh.texts(KB, "widget W29-59", settings={"search_mode": "keyword", "top_k": 1})
    assert "W29-59" in texts[0]
    state = fresh.host.engine.installation("dedicated").kb(KB)
    # every file has one document vector beside its passages
    assert len(state.index) == total - len(ids) and state.known_files() == set(ids)
    await fresh.component.on_knowledge_base_delete(KB)
    assert host.vector_count(KB) == 0


async def test_kb_delete_uses_one_backend_call_per_500_files():
    host = FakePlugin.milvus()
    h = Harness(host)
    for i in range(40):
        await h.ingest(KB, f"f{i}.txt", f"File {i} talks about gadget G{i}.".encode())
    before = host.calls["vector_delete"]
    await h.component.on_knowledge_base_delete(KB)
    assert host.vector_count(KB) == 0
    assert host.calls["vector_delete"] - before == 1


async def test_kb_delete_past_its_budget_is_finished_by_the_next_requests_not_in_the_background(monkeypatch):
    """No task may call the host after its hook returned (SDK 0.7.18
    refuses it), and LangBot refuses vector calls for the KB once the hook returned (it deletes the
    KB's row). So the vectors go inside the hook, in one call, and the plugin-storage keys that
    did not fit in the hook's budget go with the next hooks."""
    import asyncio

    from lucidrag import engine as engine_module

    monkeypatch.setattr(engine_module, "KB_DELETE_BUDGET_S", 0.05)
    host = FakePlugin.milvus()
    h = Harness(host)
    for i in range(12):  # more keys than one round of deletes (8 in flight) removes
        await h.ingest(KB, f"f{i}.txt", f"File {i} talks about gadget G{i}.".encode())
    real = host.delete_plugin_storage

    async def slow(key: str) -> None:
        await asyncio.sleep(0.03)
        await real(key)

    host.delete_plugin_storage = slow  # type: ignore[method-assign]
    await h.component.on_knowledge_base_delete(KB)  # returns within the budget
    assert host.vector_count(KB) == 0, "vectors are reachable only inside the hook"
    assert any(k == pending_kb_delete_key(KB) for k in host.storage)
    tasks_before = len(asyncio.all_tasks())
    calls = host.calls["delete_plugin_storage"]
    await asyncio.sleep(0.2)
    assert host.calls["delete_plugin_storage"] == calls and len(asyncio.all_tasks()) == tasks_before
    for _ in range(10):  # every later request of the installation does a bounded slice
        await h.retrieve("kb-other", "anything")
    assert not any(KB in k for k in host.storage)


async def test_a_kb_delete_cut_short_by_langbot_removing_the_kb_is_not_stuck(monkeypatch):
    """A backend that refuses the one-call delete, and a hook budget too short for file-by-file:
    once LangBot has dropped the KB, its vectors cannot be reached; the deletion still ends (keys
    gone, no retry loop against a KB the host no longer knows)."""
    from lucidrag import engine as engine_module

    monkeypatch.setattr(engine_module, "KB_DELETE_BUDGET_S", 0.0)
    host = FakePlugin.milvus()
    h = Harness(host)
    for i in range(3):
        await h.ingest(KB, f"f{i}.txt", f"File {i} talks about gadget G{i}.".encode())
    host.fail("vector_delete", when=lambda filters=None, **_: filters is not None)
    listed: list[str] = []
    real_list = host.vector_list

    async def listing(collection_id: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        listed.append(collection_id)
        return await real_list(collection_id, *args, **kwargs)

    await h.component.on_knowledge_base_delete(KB)
    host.faults.clear()
    host.vector_list = listing  # type: ignore[method-assign]
    for _ in range(5):
        await h.retrieve("kb-other", "anything")
    assert not any(KB in k for k in host.storage)
    assert KB not in listed, "no listing loop against a deleted KB"


async def test_an_unfinished_kb_delete_is_resumed_by_a_restarted_plugin():
    host = FakePlugin.milvus()
    h = Harness(host)
    await h.ingest(KB, "solar.txt", SOLAR)
    host.storage[pending_kb_delete_key(KB)] = b"{}"  # the process died mid-deletion
    fresh = Harness(FakePlugin.milvus())
    fresh.host.collections, fresh.host.dims, fresh.host.storage = host.collections, host.dims, host.storage
    await fresh.retrieve("kb-other", "anything")  # the first request of the new process finishes it
    assert host.vector_count(KB) == 0 and not any(KB in k for k in host.storage)
