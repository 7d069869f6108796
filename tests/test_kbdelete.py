"""Deleting a knowledge base (lucidrag/state/kbdelete.py): which calls reach the vector DB, and
that every vector and plugin-storage key goes, whichever delete the backend takes.

The vectors of a deleted KB can only be reached inside `on_knowledge_base_delete`: one filter
delete of every vector where the backend takes `$ne`, else the files LucidRAG has records of by
`file_id $in` filter (FILTER_DELETE_BATCH per call), then whatever the vector DB still lists, by
file id (DELETE_BATCH per call). Written against the survivors of a mutation run of kbdelete.py
(docs/TESTING.md).
"""

from __future__ import annotations

from typing import Any

import pytest

import lucidrag.engine as engine_module
from lucidrag.state import kbdelete
from lucidrag.state.kbdelete import ALL_VECTORS
from lucidrag.state.storage_keys import pending_kb_delete_key
from lucidrag.vectors.vectorscan import LIST_PAGE
from tests.conftest import FakePlugin, Harness

KB = "kb-deleted"


def refuses_ne(filters: dict[str, Any] | None = None, **_: Any) -> bool:
    """An adapter that cannot translate `$ne` refuses the one-call delete."""
    return filters == ALL_VECTORS


def restarted(host: FakePlugin) -> Harness:
    """A new plugin process over the same vector DB and plugin storage: it knows files only by
    their stored records."""
    fresh = FakePlugin()
    fresh.collections, fresh.dims, fresh.storage = host.collections, host.dims, host.storage
    return Harness(fresh)


def record_vector_calls(host: FakePlugin) -> list[tuple[str, Any]]:
    """Every vector_delete / vector_list the host receives, with what it was asked."""
    calls: list[tuple[str, Any]] = []
    delete, listing = host.vector_delete, host.vector_list

    async def vector_delete(collection_id: str, file_ids: list[str] | None = None,
                            filters: dict[str, Any] | None = None) -> int:
        calls.append(("file_ids", list(file_ids)) if file_ids is not None else ("filters", filters))
        return await delete(collection_id, file_ids=file_ids, filters=filters)

    async def vector_list(collection_id: str, filters: dict[str, Any] | None = None, limit: int = 20,
                          offset: int = 0) -> dict[str, Any]:
        calls.append(("list", (collection_id, filters, limit, offset)))
        return await listing(collection_id, filters=filters, limit=limit, offset=offset)

    host.vector_delete = vector_delete  # type: ignore[method-assign]
    host.vector_list = vector_list  # type: ignore[method-assign]
    return calls


async def kb_with_recorded_and_unrecorded_files(recorded: int, unrecorded: int) -> tuple[FakePlugin, list[str], list[str]]:
    """Files of one chunk each; the records of the last `unrecorded` ones never reached storage,
    so a restarted plugin finds those only in the vector DB."""
    host = FakePlugin()
    harness = Harness(host)
    await harness.ingest("kb-other", "other.txt", b"Another knowledge base keeps its vector.")
    known = [(await harness.ingest(KB, f"k{i}.txt", f"Known file {i} is about gadget K{i}.".encode())).document_id
             for i in range(recorded)]
    host.fail("set_plugin_storage", when=lambda key, **_: "/file/" in key)  # until the process dies
    lost = [(await harness.ingest(KB, f"u{i}.txt", f"Lost file {i} is about gadget U{i}.".encode())).document_id
            for i in range(unrecorded)]
    assert host.vector_count(KB) == recorded + unrecorded
    return host, sorted(known), sorted(lost)


def gone(host: FakePlugin) -> bool:
    return host.vector_count(KB) == 0 and not any(KB in key for key in host.storage) and host.vector_count("kb-other") == 1


async def test_every_vector_goes_in_one_call_where_the_backend_takes_it():
    host, _, _ = await kb_with_recorded_and_unrecorded_files(3, 2)
    back = restarted(host)
    calls = record_vector_calls(back.host)
    await back.component.on_knowledge_base_delete(KB)
    assert gone(host)
    assert calls == [("filters", ALL_VECTORS), ("list", (KB, None, LIST_PAGE, 0))]
    assert back.host.engine.installation("dedicated").deletions == {}, "finished within the hook"


async def test_a_backend_refusing_the_one_call_delete_gets_the_recorded_files_by_filter_then_the_rest_by_id(
        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(kbdelete, "FILTER_DELETE_BATCH", 3)
    monkeypatch.setattr(kbdelete, "DELETE_BATCH", 2)
    host, known, lost = await kb_with_recorded_and_unrecorded_files(7, 3)
    back = restarted(host)
    back.host.fail("vector_delete", when=refuses_ne)
    calls = record_vector_calls(back.host)
    await back.component.on_knowledge_base_delete(KB)
    assert gone(host)
    listing = ("list", (KB, None, LIST_PAGE, 0))
    assert [c for c in calls if c != ("filters", ALL_VECTORS)] == [
        ("filters", {"file_id": {"$in": known[0:3]}}),
        ("filters", {"file_id": {"$in": known[3:6]}}),
        ("filters", {"file_id": known[6]}),
        listing,
        ("file_ids", lost[0:2]),
        ("file_ids", lost[2:3]),
        listing,
    ]


async def test_recorded_files_a_backend_will_not_delete_by_filter_are_deleted_by_id(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(kbdelete, "DELETE_BATCH", 2)
    host, known, lost = await kb_with_recorded_and_unrecorded_files(2, 1)
    back = restarted(host)
    back.host.fail("vector_delete", when=lambda filters=None, **_: filters is not None)  # no filter delete at all
    calls = record_vector_calls(back.host)
    await back.component.on_knowledge_base_delete(KB)
    assert gone(host)
    everything = sorted(known + lost)
    assert [c for c in calls if c[0] == "file_ids"] == [("file_ids", everything[0:2]), ("file_ids", everything[2:3])]


async def test_a_deletion_resumed_after_langbot_dropped_the_kb_makes_one_vector_call_and_removes_the_keys():
    host, _, _ = await kb_with_recorded_and_unrecorded_files(2, 0)
    host.storage[pending_kb_delete_key(KB)] = b"{}"  # the process died mid-deletion
    host.deleted_kbs.add(KB)  # and LangBot has removed the KB since: its vectors are unreachable
    back = restarted(host)
    back.host.deleted_kbs = host.deleted_kbs
    calls = record_vector_calls(back.host)
    await back.retrieve("kb-other", "anything")  # the first request of the new process resumes it
    # (besides the question's own look for kb-other's chunk-0 vectors)
    assert [c for c in calls if c[0] != "list" or c[1][0] == KB] == [("filters", ALL_VECTORS)]
    assert not any(KB in key for key in host.storage)


async def test_an_upload_of_the_previous_process_landing_during_the_deletion_is_removed(monkeypatch: pytest.MonkeyPatch):
    """LangBot does not cancel a dead plugin's calls: an upsert the previous process sent lands
    while the new one deletes the KB, after its vector pass (while its keys go). Within the previous
    process's landing window the hook lists the vectors once more before it returns (its last
    chance to reach them)."""
    host, known, _ = await kb_with_recorded_and_unrecorded_files(2, 0)
    late = {i: m for i, m in host.collections[KB].items() if m[1].get("file_id") == known[0]}
    monkeypatch.setattr(engine_module, "PREVIOUS_PROCESS_LANDING_S", 120.0)
    back = restarted(host)
    delete_key = back.host.delete_plugin_storage

    async def landing_meanwhile(key: str) -> None:  # after the vector pass: while the keys go
        host.collections[KB].update(late)  # the previous process's upsert of known[0] lands now
        late.clear()  # (once)
        await delete_key(key)

    back.host.delete_plugin_storage = landing_meanwhile  # type: ignore[method-assign]
    await back.component.on_knowledge_base_delete(KB)
    assert gone(host)
