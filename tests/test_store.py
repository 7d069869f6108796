"""Plugin storage of one KB (lucidrag/state/store.py) on the contract-following fake host: big
values in parts, what a failed write or delete leaves, unreadable values read as "absent", and
deleting a whole KB (its pending-deletion marker last). Storage never raises into a hook."""

from __future__ import annotations

import json
import math
import time

import pytest

import lucidrag.state.store as store_module
from lucidrag.state.records import ChunkRecord, FileRecord
from lucidrag.state.storage_keys import (
    file_record_key,
    index_segment_key,
    journal_key,
    meta_key,
    pending_kb_delete_key,
)
from lucidrag.state.store import JournalEntry, KbMeta, KbStore, list_keys
from lucidrag.vectors.scoring import Metric
from tests.conftest import FakePlugin, Harness

KB = "kb-store"
SEG = index_segment_key(KB, "s1")


@pytest.fixture
def harness() -> Harness:
    return Harness(FakePlugin())


async def call(harness: Harness, method, *args):
    return await harness.invoke(method, *args)


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(store_module, "PART_SIZE", 10)
    return 10


# ---------------------------------------------------------------- values in parts
async def test_a_value_up_to_the_part_size_is_one_value(harness: Harness, small_parts):
    store = KbStore(harness.host, KB)
    assert await call(harness, store.save_index_segment, "s1", b"0123456789")
    assert {k: v for k, v in harness.host.storage.items() if k.startswith(SEG)} == {SEG: b"Z0123456789"}
    assert await call(harness, store.load_index_segment, "s1") == b"0123456789"


async def test_a_bigger_value_is_stored_in_parts_and_read_back_whole(harness: Harness, small_parts):
    store = KbStore(harness.host, KB)
    blob = bytes(range(25))
    assert await call(harness, store.save_index_segment, "s1", blob)
    stored = {k: v for k, v in harness.host.storage.items() if k.startswith(SEG)}
    assert stored == {SEG: b"P3", f"{SEG}#0": blob[:10], f"{SEG}#1": blob[10:20], f"{SEG}#2": blob[20:]}
    assert await call(harness, store.load_index_segment, "s1") == blob
    assert await call(harness, store.delete_index_segment, "s1")
    assert not [k for k in harness.host.storage if k.startswith(SEG)]


@pytest.mark.parametrize("size", [11, 20, 21, 30, 31])
async def test_values_of_every_size_round_trip_in_the_fewest_parts(harness: Harness, small_parts, size: int):
    store = KbStore(harness.host, KB)
    blob = bytes(range(size))
    assert await call(harness, store.save_index_segment, "s1", blob)
    parts = -(-size // small_parts)
    assert harness.host.storage[SEG] == b"P%d" % parts
    assert sorted(k for k in harness.host.storage if k.startswith(f"{SEG}#")) == [f"{SEG}#{n}" for n in range(parts)]
    assert await call(harness, store.load_index_segment, "s1") == blob


async def test_a_single_value_that_looks_like_a_number_is_deleted_as_one_value(harness: Harness):
    store = KbStore(harness.host, KB)
    assert await call(harness, store.save_index_segment, "s1", b"12")  # stored as b"Z12"
    harness.host.fail("delete_plugin_storage", when=lambda key, **_: "#" in key)  # there are no parts
    assert await call(harness, store.delete_index_segment, "s1")
    assert SEG not in harness.host.storage


async def test_a_record_in_parts_round_trips(harness: Harness, small_parts):
    store = KbStore(harness.host, KB)
    record = FileRecord("f1", "text", [ChunkRecord("c1", "f1", 0, "Some text " * 20, "H", 3, document_name="Doc")],
                        name="Doc")
    assert await call(harness, store.save_record, record)
    assert f"{file_record_key(KB, 'f1')}#1" in harness.host.storage
    assert await call(harness, store.load_record, "f1") == record
    assert await call(harness, store.delete_record, "f1")
    assert await call(harness, store.load_record, "f1") is None
    assert not [k for k in harness.host.storage if k.startswith(file_record_key(KB, "f1"))]


async def test_a_failed_part_write_fails_the_save_and_writes_no_header(harness: Harness, small_parts):
    store = KbStore(harness.host, KB)
    harness.host.fail("set_plugin_storage", when=lambda key, **_: key.endswith("#1"))
    assert not await call(harness, store.save_index_segment, "s1", bytes(25))
    assert SEG not in harness.host.storage
    written = sorted(k for k in harness.host.storage if k.startswith(SEG))
    assert (await call(harness, list_keys, harness.host)).stray_parts(KB) == written, \
        "the parts written in parallel are stray parts, which upkeep removes"


async def test_a_failed_part_delete_keeps_the_header_so_a_retry_finds_the_parts(harness: Harness, small_parts):
    store = KbStore(harness.host, KB)
    assert await call(harness, store.save_index_segment, "s1", bytes(25))
    harness.host.fail("delete_plugin_storage", when=lambda key, **_: key.endswith("#1"))
    assert not await call(harness, store.delete_index_segment, "s1")
    assert harness.host.storage[SEG] == b"P3"
    harness.host.faults.clear()
    assert await call(harness, store.delete_index_segment, "s1")
    assert not [k for k in harness.host.storage if k.startswith(SEG)]


@pytest.mark.parametrize("head", [b"P", b"Px", b"Q123", b"P-1"])
async def test_an_unreadable_header_reads_as_absent(harness: Harness, head: bytes):
    harness.host.storage[SEG] = head
    assert await call(harness, KbStore(harness.host, KB).load_index_segment, "s1") is None


async def test_a_missing_part_reads_as_absent(harness: Harness, small_parts):
    store = KbStore(harness.host, KB)
    assert await call(harness, store.save_index_segment, "s1", bytes(25))
    del harness.host.storage[f"{SEG}#2"]
    assert await call(harness, store.load_index_segment, "s1") is None


async def test_missing_empty_and_failing_values_read_as_absent(harness: Harness):
    store = KbStore(harness.host, KB)
    assert await call(harness, store.load_index_segment, "s1") is None
    harness.host.storage[SEG] = b""
    assert await call(harness, store.load_index_segment, "s1") is None
    harness.host.storage[SEG] = b"Zdata"
    harness.host.fail("get_plugin_storage")
    assert await call(harness, store.load_index_segment, "s1") is None


async def test_an_unreadable_record_reads_as_absent(harness: Harness):
    harness.host.storage[file_record_key(KB, "f1")] = b"Znot a record"
    assert await call(harness, KbStore(harness.host, KB).load_record, "f1") is None


# ---------------------------------------------------------------- meta
@pytest.mark.parametrize("meta", [KbMeta(Metric.SIMILARITY, True), KbMeta(None, False), KbMeta(None, None),
                                  KbMeta(Metric.SQUARED_L2, None)])
async def test_the_kb_meta_round_trips(harness: Harness, meta: KbMeta):
    store = KbStore(harness.host, KB)
    assert await call(harness, store.save_meta, meta)
    assert json.loads(harness.host.storage[meta_key(KB)]) == {
        "metric": meta.metric.value if meta.metric else None, "vectors": meta.has_vectors}
    assert await call(harness, store.load_meta) == meta


@pytest.mark.parametrize(("raw", "expected"), [
    (b"not json", None), (b"[1, 2]", None), (b"", None),
    (b'{"metric": "manhattan", "vectors": true}', KbMeta(None, True)),
    (b'{"metric": "cosine_distance", "vectors": "yes"}', KbMeta(Metric.COSINE_DISTANCE, None)),
    (b"{}", KbMeta(None, None)),
])
async def test_an_odd_kb_meta_reads_as_what_can_be_trusted(harness: Harness, raw: bytes, expected):
    harness.host.storage[meta_key(KB)] = raw
    assert await call(harness, KbStore(harness.host, KB).load_meta) == expected


async def test_a_failed_meta_write_says_so(harness: Harness):
    harness.host.fail("set_plugin_storage")
    assert await call(harness, KbStore(harness.host, KB).save_meta, KbMeta(None, True)) is False


# ---------------------------------------------------------------- journal
async def test_the_ingest_journal_round_trips_and_is_deleted(harness: Harness):
    store = KbStore(harness.host, KB)
    before = time.time()
    assert await call(harness, store.write_journal, JournalEntry("f1", 7))
    payload = json.loads(harness.host.storage[journal_key(KB, "f1")])
    assert payload["chunks"] == 7 and before <= payload["since"] <= time.time()
    assert await call(harness, store.read_journal, "f1") == JournalEntry("f1", 7)
    assert await call(harness, store.delete_journal, "f1")
    assert journal_key(KB, "f1") not in harness.host.storage
    assert await call(harness, store.read_journal, "f1") is None


async def test_a_journal_entry_keeps_the_dimension_of_the_vectors_it_names(harness: Harness):
    store = KbStore(harness.host, KB)
    assert await call(harness, store.write_journal, JournalEntry("f1", 7, 256))
    assert json.loads(harness.host.storage[journal_key(KB, "f1")])["dim"] == 256
    assert await call(harness, store.read_journal, "f1") == JournalEntry("f1", 7, 256)


@pytest.mark.parametrize(("raw", "expected"), [
    (b"garbage", JournalEntry("f1", 0)), (b'{"chunks": "x"}', JournalEntry("f1", 0)),
    (b'{"since": 1}', JournalEntry("f1", 0)), (b"[3]", None), (b'{"chunks": "4"}', JournalEntry("f1", 4)),
    (b'{"chunks": 4, "dim": 0}', JournalEntry("f1", 4)), (b'{"chunks": 4, "dim": true}', JournalEntry("f1", 4)),
    (b'{"chunks": 4, "dim": "8"}', JournalEntry("f1", 4)), (b'{"chunks": 4, "dim": 8}', JournalEntry("f1", 4, 8)),
])
async def test_an_unreadable_journal_entry_confirms_nothing_written(harness: Harness, raw: bytes, expected):
    harness.host.storage[journal_key(KB, "f1")] = raw
    assert await call(harness, KbStore(harness.host, KB).read_journal, "f1") == expected


async def test_failed_journal_writes_and_deletes_say_so(harness: Harness):
    store = KbStore(harness.host, KB)
    harness.host.fail("set_plugin_storage")
    harness.host.fail("delete_plugin_storage")
    assert await call(harness, store.write_journal, JournalEntry("f1", 1)) is False
    harness.host.storage[journal_key(KB, "f1")] = b"{}"
    assert await call(harness, store.delete_journal, "f1") is False


# ---------------------------------------------------------------- listing and the whole KB
async def test_a_listing_groups_each_kbs_keys(harness: Harness):
    host = harness.host
    for key in (file_record_key(KB, "b"), file_record_key(KB, "a"), f"{file_record_key(KB, 'a')}#0",
                journal_key(KB, "j"), index_segment_key(KB, "s"), file_record_key("other", "x"),
                journal_key("other", "y"), pending_kb_delete_key("gone"), file_record_key("third", "z")):
        host.storage[key] = b"x"
    snapshot = await call(harness, list_keys, host)
    assert snapshot.record_ids(KB) == ["a", "b"]
    assert snapshot.journal_ids(KB) == ["j"]
    assert snapshot.index_segments(KB) == ["s"]
    assert snapshot.record_ids("other") == ["x"]
    assert snapshot.pending_kb_deletes() == ["gone"]
    assert snapshot.kbs_with_journals() == [KB, "other"]
    host.fail("get_plugin_storage_keys")
    assert await call(harness, list_keys, host) is None


async def test_deleting_a_kb_removes_only_its_keys_and_its_marker_last(harness: Harness):
    host = harness.host
    store = KbStore(host, KB)
    assert await call(harness, store.mark_delete_pending)
    assert "since" in json.loads(host.storage[pending_kb_delete_key(KB)])
    for key in (file_record_key(KB, "a"), journal_key(KB, "j"), meta_key(KB), file_record_key("other", "x")):
        host.storage[key] = b"x"
    deleted: list[str] = []
    host.fail("delete_plugin_storage", when=lambda key, **_: deleted.append(key) and False)
    assert await call(harness, store.delete_everything)
    assert deleted[-1] == pending_kb_delete_key(KB) and len(deleted) == 4
    assert list(host.storage) == [file_record_key("other", "x")]


async def test_deleting_a_kb_reports_what_is_left(harness: Harness):
    host = harness.host
    store = KbStore(host, KB)
    for key in (file_record_key(KB, "a"), file_record_key(KB, "b")):
        host.storage[key] = b"x"
    assert await call(harness, store.delete_everything, time.monotonic() - 1) is False, "no time left"
    assert len(host.storage) == 2
    host.fail("delete_plugin_storage", when=lambda key, **_: key.endswith("/a"))
    assert await call(harness, store.delete_everything, math.inf) is False
    assert list(host.storage) == [file_record_key(KB, "a")], "a failure does not stop the others"
    host.faults.clear()
    host.fail("get_plugin_storage_keys")
    assert await call(harness, store.delete_everything) is False


# ---------------------------------------------------------------- what crosses the runtime connection
def test_a_stored_part_fits_one_websocket_fragment_in_the_sdks_own_messages():
    """A value over PART_SIZE is cut in parts so that no storage message exceeds the SDK's 64 KiB
    fragment (runtime/io/connections/ws.py): the write request, with the longest key we make and
    an installation's binding, and the read's answer, serialised as the SDK serialises them."""
    import base64
    import uuid

    from langbot_plugin.entities.io.actions.enums import PluginToRuntimeAction
    from langbot_plugin.entities.io.context import InstallationBinding
    from langbot_plugin.entities.io.req import ActionRequest
    from langbot_plugin.entities.io.resp import ActionResponse
    from langbot_plugin.runtime.io.connections.ws import WebSocketConnection

    fragment = WebSocketConnection.__init__.__defaults__[0]  # chunk_size
    value = base64.b64encode(bytes(store_module.PART_SIZE)).decode()
    key = index_segment_key(str(uuid.uuid4()), "f" * 32 + ".999999") + "#99999"
    binding = InstallationBinding(instance_uuid=str(uuid.uuid4()), workspace_uuid=str(uuid.uuid4()),
                                  placement_generation=2**31, installation_uuid=str(uuid.uuid4()),
                                  runtime_revision=2**31, artifact_digest="a" * 64)
    write = ActionRequest.make_request(2**31, PluginToRuntimeAction.SET_PLUGIN_STORAGE.value,
                                       {"key": key, "value_base64": value}, binding)
    answer = ActionResponse(seq_id=2**31, code=0, message="success", data={"value_base64": value})
    for message in (write, answer):
        assert len(json.dumps(message.model_dump()).encode()) <= fragment
    assert store_module.PART_SIZE >= 40 * 1024, "parts much smaller than a fragment only add round trips"


async def test_a_blobs_parts_are_written_read_and_deleted_a_few_at_a_time(harness: Harness, monkeypatch):
    """Parts go in parallel (a big segment is hundreds of round trips), but never more than
    PART_CONCURRENCY at once: the connection stays open to the plugin's other requests."""
    monkeypatch.setattr(store_module, "PART_SIZE", 10)
    host = harness.host
    host.latency = 0.001
    store = KbStore(host, KB)
    blob = bytes(range(250))  # 25 parts
    assert await call(harness, store.save_index_segment, "s1", blob)
    assert await call(harness, store.load_index_segment, "s1") == blob
    assert await call(harness, store.delete_index_segment, "s1")
    assert not host.storage
    for method in ("set_plugin_storage", "get_plugin_storage", "delete_plugin_storage"):
        assert host.peak_in_flight[method] == store_module.PART_CONCURRENCY, method
    assert host.calls["set_plugin_storage"] == 26 and host.calls["get_plugin_storage"] == 27


async def test_a_kbs_keys_are_deleted_a_few_at_a_time_and_its_marker_last(harness: Harness):
    host = harness.host
    host.latency = 0.001
    store = KbStore(host, KB)
    assert await call(harness, store.mark_delete_pending)
    for n in range(40):
        host.storage[file_record_key(KB, f"f{n}")] = b"x"
    deleted: list[str] = []
    host.fail("delete_plugin_storage", when=lambda key, **_: deleted.append(key) and False)
    assert await call(harness, store.delete_everything)
    assert not host.storage and deleted[-1] == pending_kb_delete_key(KB) and len(deleted) == 41
    assert host.peak_in_flight["delete_plugin_storage"] == store_module.PART_CONCURRENCY
