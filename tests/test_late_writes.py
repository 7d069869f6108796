"""Writes whose answer was lost: LangBot never cancels a call the plugin stopped waiting for, so
such an upsert (or record save) may write its vectors (or record) after the plugin removed the
file. Whatever lands is removed by the next process (the file's journal entry "0 chunks" stays
for it), and never answered meanwhile."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

import lucidrag.engine
from lucidrag.state import latewrites, lifecycle
from lucidrag.state.kbstate import PROBE_FILE_ID
from lucidrag.state.storage_keys import file_record_key
from tests.conftest import FakePlugin, Harness
from tests.fakes import ActionCallTimeoutError
from tests.test_state_runtime import long_text, restarted

KB = "kb-late"
SOLAR = b"The solar array on building C produces 42 kilowatts at noon in June."
CREATE = {"embedding_model_uuid": "embed-model-1"}


def answer_lost_once(host: FakePlugin, file_id: str) -> list[Callable[[], Awaitable[Any]]]:
    """The next upsert of `file_id`'s vectors is left to land later (the returned landings): the
    plugin gets the SDK's call timeout."""
    real, landings = host.vector_upsert, []

    async def upsert(*args: Any, **kwargs: Any) -> Any:
        if not landings and kwargs["metadata"][0].get("file_id") == file_id:
            landings.append(lambda: real(*args, **kwargs))
            raise ActionCallTimeoutError("vector_upsert: the action call timed out")
        return await real(*args, **kwargs)

    host.vector_upsert = upsert  # type: ignore[method-assign]
    return landings


async def test_an_upsert_landing_after_its_file_was_deleted_is_removed_after_a_restart():
    host = FakePlugin()
    harness = Harness(host)
    landings = answer_lost_once(host, "solar")
    assert (await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")).status == DocumentStatus.COMPLETED
    assert await harness.component.delete_document(KB, "solar") is True
    await landings[0]()  # LangBot finishes the upsert the plugin gave up on
    back = restarted(host)
    for mode in ("vector", "keyword", "hybrid"):
        response = await back.retrieve(KB, "solar array kilowatts", settings={"search_mode": mode})
        assert [e.metadata["file_id"] for e in response.results] == []
    assert host.vectors_of(KB, "solar") == []


async def test_a_probe_landing_after_the_collection_was_opened_is_removed_after_a_restart():
    host = FakePlugin.milvus()
    harness = Harness(host)
    host.fail("set_plugin_storage", when=lambda key, **_: key.endswith("/meta"))
    await harness.component.on_knowledge_base_create(KB, CREATE)
    back = restarted(host)  # storage holds nothing of the KB: whether its collection exists is unknown
    landings = answer_lost_once(back.host, PROBE_FILE_ID)
    # the probe's first answer is lost; its retry opens the collection
    await back.retrieve(KB, "anything", settings={"search_mode": "vector"})
    assert landings, "the probe was not sent"
    assert (await back.ingest(KB, "solar.txt", SOLAR)).status == DocumentStatus.COMPLETED
    await landings[0]()
    again = restarted(host)  # the KB has vectors now: no probe of its own
    for _ in range(3):
        await again.retrieve(KB, "anything")
    assert host.vectors_of(KB, PROBE_FILE_ID) == []


async def test_a_record_save_landing_after_its_file_was_deleted_is_removed_after_a_restart():
    host = FakePlugin()
    harness = Harness(host)
    real, landings = host.set_plugin_storage, []

    async def save(key: str, value: bytes) -> None:
        if key == file_record_key(KB, "solar") and not landings:
            landings.append(lambda: real(key, value))
            raise ActionCallTimeoutError("set_plugin_storage: the action call timed out")
        await real(key, value)

    host.set_plugin_storage = save  # type: ignore[method-assign]
    assert (await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")).status == DocumentStatus.COMPLETED
    assert await harness.component.delete_document(KB, "solar") is True
    await landings[0]()  # LangBot finishes the first save, which the commit had given up on
    back = restarted(host)
    for mode in ("keyword", "vector", "hybrid"):
        response = await back.retrieve(KB, "solar array kilowatts", settings={"search_mode": mode})
        assert [e.metadata["file_id"] for e in response.results] == []
    assert file_record_key(KB, "solar") not in host.storage


async def test_a_re_upload_whose_earlier_version_delete_went_unanswered_fails_instead_of_losing_its_vectors():
    """The delete of the earlier version lost its answer (LangBot may do it any time later, after
    the new vectors): the upload FAILS rather than COMPLETE with vectors that vanish later."""
    host = FakePlugin()
    harness = Harness(host)
    assert (await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")).status == DocumentStatus.COMPLETED
    real, landings = host.vector_delete, []

    async def delete(*args: Any, **kwargs: Any) -> int:
        if not landings:
            landings.append(lambda: real(*args, **kwargs))
            raise ActionCallTimeoutError("vector_delete: the action call timed out")
        return await real(*args, **kwargs)

    host.vector_delete = delete  # type: ignore[method-assign]
    again = await harness.ingest(KB, "solar.txt", SOLAR + b" The array was cleaned in May.", document_id="solar")
    await landings[0]()
    assert again.status == DocumentStatus.FAILED


Landing = tuple[float, Callable[[], Awaitable[Any]]]


def removal_answer_lost(host: FakePlugin, file_id: str, window: float) -> list[Landing]:
    """The first delete of `file_id`'s vectors loses its answer: LangBot does it within `window`
    (the returned landing: when its window ends, and the call)."""
    real, landings, lost = host.vector_delete, [], []

    async def delete(*args: Any, **kwargs: Any) -> int:
        if kwargs.get("file_ids") == [file_id] and not lost:
            lost.append(True)
            landings.append((time.monotonic() + window, lambda: real(*args, **kwargs)))
            raise ActionCallTimeoutError("vector_delete: the action call timed out")
        return await real(*args, **kwargs)

    host.vector_delete = delete  # type: ignore[method-assign]
    return landings


def lands_at_the_worst_moment(host: FakePlugin, landings: list[Landing]) -> None:
    """The held-back call lands right after the next upsert, unless its window has ended by then,
    or by a vector delete before it (then it landed before that)."""
    real_upsert, real_delete = host.vector_upsert, host.vector_delete

    async def landed_if_due() -> None:
        if landings and time.monotonic() >= landings[0][0]:
            await landings.pop()[1]()

    async def delete(*args: Any, **kwargs: Any) -> Any:
        await landed_if_due()
        return await real_delete(*args, **kwargs)

    async def upsert(*args: Any, **kwargs: Any) -> Any:
        await landed_if_due()
        result = await real_upsert(*args, **kwargs)
        if landings:
            await landings.pop()[1]()
        return result

    host.vector_upsert, host.vector_delete = upsert, delete  # type: ignore[method-assign]


async def failed_upload_whose_removal_went_unanswered(host: FakePlugin, harness: Harness,
                                                       window: float) -> list[Landing]:
    assert (await harness.ingest(KB, "other.txt", b"The kettle in the kitchen boils water.")).status \
        == DocumentStatus.COMPLETED
    host.fail("vector_upsert", when=lambda ids, **_: bool(ids))  # the upload fails
    landings = removal_answer_lost(host, "solar", window)
    failed = await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")
    assert failed.status == DocumentStatus.FAILED and landings, "the rollback's delete was not sent"
    host.faults.pop("vector_upsert")
    return landings


async def solar_is_found(harness: Harness) -> None:
    assert (await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")).status == DocumentStatus.COMPLETED
    assert harness.host.vectors_of(KB, "solar")
    response = await harness.retrieve(KB, "solar array kilowatts", settings={"search_mode": "vector"})
    assert "solar" in [e.metadata["file_id"] for e in response.results]


async def test_a_re_upload_after_a_failed_upload_whose_removal_went_unanswered_waits_for_that_removal(monkeypatch):
    """A failed upload's removal of its vectors lost its answer; LangBot does it within its landing
    window, whenever. The same document id uploaded again must not write its vectors before that
    window ends: done after them, the removal would leave the COMPLETED file with no vector (seed
    1783)."""
    window = 0.3
    monkeypatch.setattr(latewrites, "PREVIOUS_PROCESS_LANDING_S", window)
    host = FakePlugin()
    harness = Harness(host)
    landings = await failed_upload_whose_removal_went_unanswered(host, harness, window)
    lands_at_the_worst_moment(host, landings)
    await solar_is_found(harness)
    assert not landings


async def test_a_re_upload_by_the_next_process_waits_for_a_removal_the_previous_one_left_unanswered(monkeypatch):
    """The same, with the plugin restarted before the re-upload: the dead process's note of the
    unanswered removal died with it, so the failed file keeps its journal entry "0 chunks" for the
    next process (TOMBSTONED), whose upload of the id waits until the previous process's calls can
    no longer land."""
    window = 0.3
    monkeypatch.setattr(latewrites, "PREVIOUS_PROCESS_LANDING_S", window)
    host = FakePlugin()
    landings = await failed_upload_whose_removal_went_unanswered(host, Harness(host), window)
    monkeypatch.setattr(lucidrag.engine, "PREVIOUS_PROCESS_LANDING_S", window)
    back = restarted(host)
    lands_at_the_worst_moment(back.host, landings)
    await solar_is_found(back)
    assert not landings


async def test_a_re_upload_waits_for_a_write_of_the_earlier_upload_that_may_still_land(monkeypatch):
    """An upload COMPLETED although one of its upserts lost its answer (a retry wrote it); LangBot
    may still do the first one. The same document id uploaded again waits until it can no longer
    land before it removes the earlier version: landing after, it would bring the earlier
    version's chunks back beside the new ones."""
    window = 0.3
    monkeypatch.setattr(lifecycle, "PREVIOUS_PROCESS_LANDING_S", window)
    host = FakePlugin()
    harness = Harness(host)
    real, late = host.vector_upsert, []

    async def upsert(*args: Any, **kwargs: Any) -> Any:
        if not late:  # the first upsert lands within its window, whenever
            late.append((time.monotonic() + window, lambda: real(*args, **kwargs)))
            raise ActionCallTimeoutError("vector_upsert: the action call timed out")
        return await real(*args, **kwargs)

    host.vector_upsert = upsert  # type: ignore[method-assign]
    earlier = await harness.ingest(KB, "solar.txt", long_text(40), document_id="solar")
    assert earlier.status == DocumentStatus.COMPLETED and late, "no upsert lost its answer"
    lands_at_the_worst_moment(host, late)
    assert (await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")).status == DocumentStatus.COMPLETED
    texts = [m["text"] for m in host.vectors_of(KB, "solar")]
    assert texts and not any("QX-" in t for t in texts), "the earlier version's chunks came back"
