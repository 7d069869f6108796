"""Reading the keyword-index snapshot after a restart (lucidrag/state/snapshotload.py) when plugin
storage misbehaves: a segment read that fails is tried again, READ_ATTEMPTS failures or a missing
or unreadable segment make the snapshot unusable, and the KB is indexed from its records instead;
every query is answered either way.

Written against the survivors of a mutation run of snapshotload.py (docs/TESTING.md).
"""

from __future__ import annotations

import asyncio

import pytest

from lucidrag.base.budget import HOOK_TIMEOUT_S
from lucidrag.state.snapshotload import READ_ATTEMPTS, READS_IN_FLIGHT
from lucidrag.state.storage_keys import index_segment_key, kb_prefix
from tests.conftest import Harness
from tests.test_scale_state import KB, ingest_manuals, state_of
from tests.test_state_runtime import restarted

pytestmark = pytest.mark.usefixtures("persist_every_segment")


async def restarted_with_a_segment(harness: Harness, host) -> tuple[Harness, str]:
    await ingest_manuals(harness, 6)
    segments = sorted(k for k in host.storage if k.startswith(index_segment_key(KB, "")) and "#" not in k)
    assert segments
    return restarted(host), segments[0]


def failing(times: int, key: str):
    """A storage read of `key` that fails `times` times, then answers."""
    left = {"n": times}

    def when(key: str = "", **_: object) -> bool:
        if key != wanted or left["n"] == 0:
            return False
        left["n"] -= 1
        return True
    wanted = key
    return when


async def answered(back: Harness) -> bool:
    texts = await asyncio.wait_for(back.texts(KB, "PX-3-4", settings={"search_mode": "keyword", "top_k": 1}), 30)
    return bool(texts) and "PX-3-4" in texts[0]


def snapshot_used(back: Harness, segment: str) -> bool:
    """Whether the index was loaded from the snapshot (its segment is live), not built again."""
    state = state_of(back)
    return state.loaded and segment.rsplit("/", 1)[-1] in state.snapshot.live


async def test_a_segment_read_that_fails_less_often_than_the_limit_is_tried_again(harness: Harness, host):
    back, segment = await restarted_with_a_segment(harness, host)
    back.host.fail("get_plugin_storage", when=failing(READ_ATTEMPTS - 1, segment))
    assert await answered(back)
    assert snapshot_used(back, segment) and back.host.reads[segment] == READ_ATTEMPTS


async def test_a_segment_that_storage_never_returns_is_given_up_after_the_limit(harness: Harness, host):
    back, segment = await restarted_with_a_segment(harness, host)
    loading_reads = []

    def fails(key: str = "", **_: object) -> bool:
        if key == segment and not state_of(back).loaded:
            loading_reads.append(key)
        return key == segment
    back.host.fail("get_plugin_storage", when=fails)
    assert await answered(back), "indexed from the records instead"
    assert not snapshot_used(back, segment) and len(loading_reads) == READ_ATTEMPTS


@pytest.mark.parametrize("damage", ["missing", "unreadable header"])
async def test_a_missing_or_unreadable_segment_costs_a_reindex_not_an_answer(harness: Harness, host, damage: str):
    back, segment = await restarted_with_a_segment(harness, host)
    for key in [k for k in host.storage if k == segment or k.startswith(segment + "#")]:
        del host.storage[key]
    if damage == "unreadable header":
        host.storage[segment] = b"?"
    assert await answered(back)
    assert not snapshot_used(back, segment) and all(k.startswith(kb_prefix(KB)) for k in back.host.reads)


async def test_failed_reads_on_every_reader_at_once_do_not_stop_the_load(harness: Harness, host):
    """Each of the READS_IN_FLIGHT readers has a read fail once (storage hiccups on the first reads
    after a restart): they read on, so the query that started the load still finds the snapshot
    complete. A reader that stopped at its failure left the keys to no one in this query."""
    back, _ = await restarted_with_a_segment(harness, host)
    segments = sorted(k for k in host.storage if k.startswith(index_segment_key(KB, "")))
    assert len(segments) >= READS_IN_FLIGHT
    failed: set[str] = set()

    def first_read_of_each_fails(key: str = "", **_: object) -> bool:
        if key not in segments or key in failed or len(failed) >= READS_IN_FLIGHT:
            return False
        failed.add(key)
        return True
    back.host.fail("get_plugin_storage", when=first_read_of_each_fails)
    assert await answered(back)
    assert len(failed) == READS_IN_FLIGHT
    state = state_of(back)
    assert state.loaded and {k.rsplit("/", 1)[-1] for k in segments if "#" not in k} <= set(state.snapshot.live)


async def test_a_query_with_under_a_second_left_still_reads_the_index(harness: Harness, host, monkeypatch):
    """A query whose hook has under a second left (0.8 s: a 1 s timeout less the plugin's reserve)
    still reads the snapshot, which takes a few milliseconds here: readers stop when the hook's time
    is up, not a second before it."""
    back, segment = await restarted_with_a_segment(harness, host)
    monkeypatch.setitem(HOOK_TIMEOUT_S, "retrieve", 1.0)
    assert await answered(back)
    assert snapshot_used(back, segment)
