"""Everything LucidRAG keeps in LangBot's plugin storage, for one knowledge base at a time.

Plugin storage is fallible (a host with SQLAlchemy 2.1 fails every write; reading a missing key
raises): every method here either succeeds or returns a falsy value and logs; nothing raises into
ingest, retrieve or delete. Every call keeps to the current hook's deadline (base/budget.py): one
that would pass it counts as failed, and the caller's retry state carries the work over. The
vector DB stays the source of truth; what is lost here is rebuilt from it. Key names come from
`storage_keys` only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
import zlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from lucidrag.base.blocking import run_blocking
from lucidrag.base.budget import bounded
from lucidrag.base.host import HostApi, describe
from lucidrag.state.latewrites import answer_lost, unanswered_storage_writes
from lucidrag.state.records import FileRecord
from lucidrag.state.storage_keys import (
    KeyGroups,
    file_record_key,
    group_keys,
    index_manifest_key,
    index_segment_key,
    journal_key,
    keys_of_kb,
    meta_key,
    part_key,
    pending_kb_delete_key,
    pending_kb_deletes,
    stray_parts,
)
from lucidrag.vectors.scoring import Metric

logger = logging.getLogger(__name__)

# Bytes per storage value; bigger values are stored in parts. A value crosses each runtime hop
# (LangBot <-> `lbp rt` <-> plugin) base64-encoded inside one JSON message, and the SDK
# (langbot_plugin 0.7.18, runtime/io/connections/ws.py) sends a message over 64 KiB as WebSocket
# fragments cut by `split_utf8_chunks`: a Python loop over every character, run under the
# connection's send lock, so one big value holds up every other call of the plugin (~5 MiB/s,
# docs/SCALE.md). 46 KiB is 62,808 base64 characters: with the key and the envelope the message
# stays within one fragment (tests/test_store.py builds the SDK's own messages to check).
PART_SIZE = 46 * 1024
PART_CONCURRENCY = 8  # storage calls in flight for one blob's parts, or for a KB's keys on delete
_SINGLE = b"Z"
_PARTS = b"P"
# A keyword-index segment is stored zlib-compressed at level 1, behind this mark (segments written
# before it are stored raw): 0.59 of the bytes on a 100k-chunk index for 19 ms of CPU per MiB,
# and every byte read at a restart crosses the runtime connection twice (docs/SCALE.md).
_PACKED_SEGMENT = b"LRSZ"
SEGMENT_LEVEL = 1


@dataclass(frozen=True)
class KbMeta:
    metric: Metric | None
    has_vectors: bool | None  # False: written at KB creation, no vector was ever upserted


@dataclass(frozen=True)
class JournalEntry:
    """An ingest that was about to write vectors. `chunks` is how many it was going to write,
    `dim` their dimension (None in entries written before it was kept): what removing them from a
    KB that never had a vector re-creates the collection with (`KnowledgeBaseState.remove_first_write`)."""

    file_id: str
    chunks: int
    dim: int | None = None


@dataclass(frozen=True)
class KeySnapshot:
    """One listing of every plugin-storage key (the host has no per-prefix listing), grouped once."""

    keys: tuple[str, ...]
    groups: KeyGroups = field(default_factory=dict)

    @classmethod
    def of(cls, keys: list[str]) -> KeySnapshot:
        return cls(tuple(keys), group_keys(keys))

    def record_ids(self, kb_id: str) -> list[str]:
        return sorted(self.groups.get((kb_id, "file"), ()))

    def journal_ids(self, kb_id: str) -> list[str]:
        return sorted(self.groups.get((kb_id, "journal"), ()))

    def index_segments(self, kb_id: str) -> list[str]:
        return sorted(self.groups.get((kb_id, "kw/seg"), ()))

    def query_log_blocks(self, kb_id: str) -> list[int]:
        return sorted(int(n) for n in self.groups.get((kb_id, "qlog"), ()) if n.isdigit())

    def has_meta(self, kb_id: str) -> bool:
        return meta_key(kb_id) in self.keys

    def pending_kb_deletes(self) -> list[str]:
        return pending_kb_deletes(list(self.keys))

    def kbs_with_journals(self) -> list[str]:
        return sorted({kb_id for kb_id, kind in self.groups if kind == "journal"})

    def stray_parts(self, kb_id: str) -> list[str]:
        return stray_parts(list(self.keys), kb_id)


async def list_keys(host: HostApi) -> KeySnapshot | None:
    try:
        keys = await bounded(host.get_plugin_storage_keys)
    except Exception as error:  # noqa: BLE001
        logger.warning("could not list plugin storage (%s)", describe(error))
        return None
    return await run_blocking(KeySnapshot.of, list(keys))


async def put_value(host: HostApi, key: str, value: bytes, what: str) -> bool:
    try:
        await bounded(lambda: host.set_plugin_storage(key, value))
        return True
    except BaseException as error:
        writes = unanswered_storage_writes.get()
        if writes is not None and answer_lost(error):
            writes.given_up(key)  # a cancelled wait too: LangBot does the write all the same
        if not isinstance(error, Exception):
            raise
        logger.warning("could not save %s (%s)", what, describe(error))  # best effort by contract
        return False


class StorageReadFailed(Exception):
    """Plugin storage failed to answer a read (not: the key is missing)."""


# LangBot 4.11.2 answers a read of a missing key with an error, "Storage with key <key> not found"
# (pkg/plugin/handler.py, get_binary_storage); any other error is a failed read.
_MISSING_KEY = re.compile(r"\bnot found\b", re.IGNORECASE)


async def read_value(host: HostApi, key: str) -> bytes | None:
    """The value, or None when the key is missing. Raises StorageReadFailed when storage failed."""
    try:
        return await bounded(lambda: host.get_plugin_storage(key)) or None
    except Exception as error:  # noqa: BLE001 - classified by its message
        if _MISSING_KEY.search(str(error)):
            return None
        raise StorageReadFailed(describe(error)) from error


async def get_value(host: HostApi, key: str) -> bytes | None:
    """The value, or None when the key is missing or storage failed."""
    try:
        return await read_value(host, key)
    except StorageReadFailed:
        return None


async def delete_value(host: HostApi, key: str, what: str) -> bool:
    try:
        await bounded(lambda: host.delete_plugin_storage(key))
        return True
    except BaseException as error:
        writes = unanswered_storage_writes.get()
        if writes is not None and answer_lost(error):
            writes.delete_given_up(key)  # LangBot may still delete it, after a new value was saved
        if not isinstance(error, Exception):
            raise
        logger.warning("could not delete %s (%s)", what, describe(error))
        return False


T = TypeVar("T")


async def run_bounded(calls: Iterable[Callable[[], Awaitable[T]]], limit: int = PART_CONCURRENCY) -> list[T]:
    """Await every call, at most `limit` at a time; their results in order. A call is only made
    (and its argument built) when a slot frees, so thousands of parts cost no more memory than
    `limit` of them."""
    pending = list(calls)
    results: list[T] = [None] * len(pending)  # type: ignore[list-item]
    queue = iter(enumerate(pending))

    async def worker() -> None:
        for n, call in queue:
            results[n] = await call()

    await asyncio.gather(*(worker() for _ in range(min(limit, len(pending)))))
    return results


def blob_head(head: bytes) -> bytes | int:
    """What the stored value of a blob's key says: the blob itself, or how many parts hold it
    (`ValueError` if it is neither)."""
    if head[:1] == _SINGLE:
        return head[1:]
    if head[:1] == _PARTS and head[1:].isdigit():
        return int(head[1:])
    raise ValueError("unreadable header")


def pack_segments(segments: dict[str, bytes]) -> dict[str, bytes]:
    """Keyword-index segments as they are stored (CPU-heavy: call it in a thread)."""
    return {name: _PACKED_SEGMENT + zlib.compress(blob, SEGMENT_LEVEL) for name, blob in segments.items()}


def unpack_segment(stored: bytes) -> bytes:
    """A segment as `SegmentIndex.load` takes it, from its stored form (`ValueError` if that
    does not decompress)."""
    if stored[: len(_PACKED_SEGMENT)] != _PACKED_SEGMENT:
        return stored
    try:
        return zlib.decompress(memoryview(stored)[len(_PACKED_SEGMENT):])
    except zlib.error as error:
        raise ValueError(f"unreadable keyword-index segment ({error})") from None


def _part_count(head: bytes | None) -> int:
    """How many parts a stored header names (0 for a single value or none)."""
    if head and head[:1] == _PARTS and head[1:].isdigit():
        return int(head[1:])
    return 0


def decode_record(kb_id: str, file_id: str, blob: bytes | None) -> FileRecord | None:
    if blob is None:
        return None
    try:
        return FileRecord.from_bytes(blob)
    except ValueError as error:
        logger.warning("kb=%s file=%s: unreadable file record (%s)", kb_id, file_id, error)
        return None


class KbStore:
    """Plugin storage of one knowledge base."""

    def __init__(self, host: HostApi, kb_id: str) -> None:
        self.host = host
        self.kb_id = kb_id

    # ---------------------------------------------------------------- values in parts
    async def _put_blob(self, key: str, blob: bytes, what: str, replaces: bool = True) -> bool:
        """One value, or (bigger than PART_SIZE) parts `<key>#n` and a header naming their count.
        With `replaces` (the key may hold an older value), parts of the older value beyond the
        new one's count are deleted once the new header is written."""
        old_parts = 0
        if replaces:
            try:
                old_parts = _part_count(await read_value(self.host, key))
            except StorageReadFailed:
                pass  # unknown: a surplus part may stay (parts without a header are still found)
        if len(blob) <= PART_SIZE:
            count = 0
            if not await put_value(self.host, key, _SINGLE + blob, what):
                return False
        else:
            view = memoryview(blob)
            count = (len(blob) + PART_SIZE - 1) // PART_SIZE
            written = await run_bounded(
                lambda n=n: put_value(self.host, part_key(key, n), bytes(view[n * PART_SIZE : (n + 1) * PART_SIZE]), what)
                for n in range(count))
            if not all(written):  # no header: the parts written are stray parts, found and removed later
                return False
            if not await put_value(self.host, key, _PARTS + str(count).encode(), what):
                return False
        await run_bounded(lambda n=n: delete_value(self.host, part_key(key, n), f"a surplus part of {what}")
                          for n in range(count, old_parts))
        return True

    async def _get_blob(self, key: str, what: str) -> bytes | None:
        head = await get_value(self.host, key)
        if not head:
            return None
        try:
            layout = blob_head(head)
        except ValueError:
            logger.warning("kb=%s: unreadable header of %s", self.kb_id, what)
            return None
        if isinstance(layout, bytes):
            return layout
        parts = await run_bounded(lambda n=n: get_value(self.host, part_key(key, n)) for n in range(layout))
        if None in parts:
            logger.warning("kb=%s: part %d of %s is missing", self.kb_id, parts.index(None), what)
            return None
        return await run_blocking(b"".join, parts)  # a segment of up to 128 MiB: not on the loop

    async def _delete_blob(self, key: str, what: str) -> bool:
        """Parts first, the header last (it names the parts). A header that could not be read is
        left in place and False returned, so that a later try still finds the parts; a missing
        one means there is nothing to delete (parts without a header are found as stray parts)."""
        try:
            head = await read_value(self.host, key)
        except StorageReadFailed as error:
            logger.warning("could not delete %s: its header could not be read (%s)", what, error)
            return False
        if head is None:
            return True
        count = _part_count(head)
        if not all(await run_bounded(lambda n=n: delete_value(self.host, part_key(key, n), what) for n in range(count))):
            return False
        return await delete_value(self.host, key, what)

    async def delete_stray_part(self, part: str) -> bool:
        """Delete a part key found without its header (`KeySnapshot.stray_parts`) if its header
        is still missing; a header written since means the part is live again, and it stays.
        Returns whether the part needs no more attention."""
        try:
            if await read_value(self.host, part.rpartition("#")[0]) is not None:
                return True
        except StorageReadFailed:
            return False
        return await delete_value(self.host, part, f"stray part {part}")

    # ---------------------------------------------------------------- file records
    async def save_record(self, record: FileRecord) -> bool:
        blob = await run_blocking(record.to_bytes)  # 20,000 chunks: not on the event loop
        return await self._put_blob(file_record_key(self.kb_id, record.file_id), blob,
                                    f"the record of file {record.file_id} in kb {self.kb_id}")

    async def load_record(self, file_id: str) -> FileRecord | None:
        blob = await self.load_record_blob(file_id)
        return None if blob is None else await run_blocking(decode_record, self.kb_id, file_id, blob)

    async def load_record_blob(self, file_id: str) -> bytes | None:
        """The stored record, still encoded (decode it with `decode_record`, off the event loop)."""
        return await self._get_blob(file_record_key(self.kb_id, file_id), f"the record of file {file_id}")

    async def delete_record(self, file_id: str) -> bool:
        return await self._delete_blob(file_record_key(self.kb_id, file_id),
                                       f"the record of file {file_id} in kb {self.kb_id}")

    # ---------------------------------------------------------------- keyword index snapshot
    async def save_index_segment(self, name: str, blob: bytes) -> bool:
        return await self._put_blob(index_segment_key(self.kb_id, name), blob,
                                    f"keyword index segment {name} of kb {self.kb_id}",
                                    replaces=False)  # segment names are never reused

    async def load_index_segment(self, name: str) -> bytes | None:
        """The segment as stored (`unpack_segment` gives it back as the index wrote it)."""
        return await self._get_blob(index_segment_key(self.kb_id, name), f"keyword index segment {name}")

    async def delete_index_segment(self, name: str) -> bool:
        return await self._delete_blob(index_segment_key(self.kb_id, name),
                                       f"keyword index segment {name} of kb {self.kb_id}")

    async def save_index_manifest(self, manifest: bytes) -> bool:
        return await put_value(self.host, index_manifest_key(self.kb_id), manifest,
                               f"the keyword index manifest of kb {self.kb_id}")

    async def load_index_manifest(self) -> bytes | None:
        return await get_value(self.host, index_manifest_key(self.kb_id))

    # ---------------------------------------------------------------- meta
    async def load_meta(self) -> KbMeta | None:
        raw = await get_value(self.host, meta_key(self.kb_id))
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            data = None
        if not isinstance(data, dict):
            return None
        try:
            metric = Metric(data["metric"]) if data.get("metric") else None
        except ValueError:
            metric = None
        vectors = data.get("vectors")
        return KbMeta(metric, vectors if isinstance(vectors, bool) else None)

    async def save_meta(self, meta: KbMeta) -> bool:
        payload = {"metric": meta.metric.value if meta.metric else None, "vectors": meta.has_vectors}
        return await put_value(self.host, meta_key(self.kb_id), json.dumps(payload).encode(),
                          f"the metadata of kb {self.kb_id}")

    # ---------------------------------------------------------------- ingest journal
    async def write_journal(self, entry: JournalEntry) -> bool:
        payload: dict[str, float | int] = {"chunks": entry.chunks, "since": time.time()}
        if entry.dim is not None:
            payload["dim"] = entry.dim
        return await put_value(self.host, journal_key(self.kb_id, entry.file_id), json.dumps(payload).encode(),
                          f"the ingest journal of file {entry.file_id} in kb {self.kb_id}")

    async def read_journal(self, file_id: str, strict: bool = False) -> JournalEntry | None:
        """None when the entry is missing or (unless `strict`: StorageReadFailed) storage failed."""
        key = journal_key(self.kb_id, file_id)
        raw = await (read_value if strict else get_value)(self.host, key)
        try:
            data = json.loads(raw) if raw else None
            if not isinstance(data, dict):
                return None
            dim = data.get("dim")
            return JournalEntry(file_id, int(data["chunks"]), dim if type(dim) is int and dim > 0 else None)
        except (ValueError, KeyError, TypeError):
            return JournalEntry(file_id, 0)  # unreadable: treat as "nothing confirmed written"

    async def delete_journal(self, file_id: str) -> bool:
        return await delete_value(self.host, journal_key(self.kb_id, file_id),
                             f"the ingest journal of file {file_id} in kb {self.kb_id}")

    # ---------------------------------------------------------------- the whole KB
    async def delete_everything(self, deadline: float = math.inf, keep_marker: bool = False) -> bool:
        """Every key of this KB, its pending-deletion marker last. Stops at `deadline` (a KB of
        50,000 files has more keys than one invocation can delete); returns whether all are gone,
        so the caller repeats it in a later invocation. With `keep_marker`, the marker stays (a
        write of the KB's keys given up on may still land: a later run lists the keys again)."""
        if time.monotonic() >= deadline:
            return False
        snapshot = await list_keys(self.host)
        if snapshot is None:
            return False
        marker = pending_kb_delete_key(self.kb_id)
        keys = [k for k in keys_of_kb(list(snapshot.keys), self.kb_id) if k != marker]

        async def delete(key: str) -> bool:
            return time.monotonic() < deadline and await delete_value(self.host, key, f"key {key}")

        if not all(await run_bounded(lambda k=k: delete(k) for k in keys)):
            return False
        return keep_marker or marker not in snapshot.keys or await delete(marker)

    async def mark_delete_pending(self) -> bool:
        return await put_value(self.host, pending_kb_delete_key(self.kb_id), json.dumps({"since": time.time()}).encode(),
                          f"the pending-deletion marker of kb {self.kb_id}")
