"""Everything LucidRAG keeps in LangBot's plugin storage, for one knowledge base at a time.

Plugin storage is fallible (a host with SQLAlchemy 2.1 fails every write; reading a missing key
raises): every method here either succeeds or returns a falsy value and logs; nothing raises into
ingest, retrieve or delete. The vector DB stays the source of truth; what is lost here is rebuilt
from it. Key names come from `storage_keys` only.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field

from lucidrag.base.blocking import run_blocking
from lucidrag.base.host import HostApi, describe
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
    pending_kb_delete_key,
    pending_kb_deletes,
)
from lucidrag.vectors.scoring import Metric

logger = logging.getLogger(__name__)

PART_SIZE = 4 * 1024 * 1024  # bytes per storage value; big records are stored in parts
_SINGLE = b"Z"
_PARTS = b"P"


@dataclass(frozen=True)
class KbMeta:
    metric: Metric | None
    has_vectors: bool | None  # False: written at KB creation, no vector was ever upserted


@dataclass(frozen=True)
class JournalEntry:
    """An ingest that was about to write vectors. `chunks` is how many it was going to write."""

    file_id: str
    chunks: int


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

    def has_meta(self, kb_id: str) -> bool:
        return meta_key(kb_id) in self.keys

    def pending_kb_deletes(self) -> list[str]:
        return pending_kb_deletes(list(self.keys))

    def kbs_with_journals(self) -> list[str]:
        return sorted({kb_id for kb_id, kind in self.groups if kind == "journal"})


async def list_keys(host: HostApi) -> KeySnapshot | None:
    try:
        keys = await host.get_plugin_storage_keys()
    except Exception as error:  # noqa: BLE001
        logger.warning("could not list plugin storage (%s)", describe(error))
        return None
    return await run_blocking(KeySnapshot.of, list(keys))


async def put_value(host: HostApi, key: str, value: bytes, what: str) -> bool:
    try:
        await host.set_plugin_storage(key, value)
        return True
    except Exception as error:  # noqa: BLE001 - storage is best effort by contract
        logger.warning("could not save %s (%s)", what, describe(error))
        return False


async def get_value(host: HostApi, key: str) -> bytes | None:
    """The value, or None when the key is missing or storage failed."""
    try:
        return await host.get_plugin_storage(key) or None
    except Exception:  # noqa: BLE001 - a missing key raises on the real host
        return None


async def delete_value(host: HostApi, key: str, what: str) -> bool:
    try:
        await host.delete_plugin_storage(key)
        return True
    except Exception as error:  # noqa: BLE001
        logger.warning("could not delete %s (%s)", what, describe(error))
        return False


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
    async def _put_blob(self, key: str, blob: bytes, what: str) -> bool:
        """One value, or (bigger than PART_SIZE) parts `<key>#n` and a header naming their count."""
        if len(blob) <= PART_SIZE:
            return await put_value(self.host, key, _SINGLE + blob, what)
        view = memoryview(blob)
        count = (len(blob) + PART_SIZE - 1) // PART_SIZE
        for n in range(count):
            if not await put_value(self.host, f"{key}#{n}", bytes(view[n * PART_SIZE : (n + 1) * PART_SIZE]), what):
                return False
        return await put_value(self.host, key, _PARTS + str(count).encode(), what)

    async def _get_blob(self, key: str, what: str) -> bytes | None:
        head = await get_value(self.host, key)
        if not head or head[:1] == _SINGLE:
            return head[1:] if head else None
        if head[:1] != _PARTS or not head[1:].isdigit():
            logger.warning("kb=%s: unreadable header of %s", self.kb_id, what)
            return None
        parts = []
        for n in range(int(head[1:])):
            part = await get_value(self.host, f"{key}#{n}")
            if part is None:
                logger.warning("kb=%s: part %d of %s is missing", self.kb_id, n, what)
                return None
            parts.append(part)
        return await run_blocking(b"".join, parts)  # a segment of up to 128 MiB: not on the loop

    async def _delete_blob(self, key: str, what: str) -> bool:
        head = await get_value(self.host, key) or b""
        if head[:1] == _PARTS and head[1:].isdigit():
            for n in range(int(head[1:])):
                if not await delete_value(self.host, f"{key}#{n}", what):
                    return False
        return await delete_value(self.host, key, what)

    # ---------------------------------------------------------------- file records
    async def save_record(self, record: FileRecord) -> bool:
        return await self._put_blob(file_record_key(self.kb_id, record.file_id), record.to_bytes(),
                                    f"the record of file {record.file_id} in kb {self.kb_id}")

    async def load_record(self, file_id: str) -> FileRecord | None:
        return decode_record(self.kb_id, file_id, await self.load_record_blob(file_id))

    async def load_record_blob(self, file_id: str) -> bytes | None:
        """The stored record, still encoded (decode it with `decode_record`, off the event loop)."""
        return await self._get_blob(file_record_key(self.kb_id, file_id), f"the record of file {file_id}")

    async def delete_record(self, file_id: str) -> bool:
        return await self._delete_blob(file_record_key(self.kb_id, file_id),
                                       f"the record of file {file_id} in kb {self.kb_id}")

    # ---------------------------------------------------------------- keyword index snapshot
    async def save_index_segment(self, name: str, blob: bytes) -> bool:
        return await self._put_blob(index_segment_key(self.kb_id, name), blob,
                                    f"keyword index segment {name} of kb {self.kb_id}")

    async def load_index_segment(self, name: str) -> bytes | None:
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
        payload = {"chunks": entry.chunks, "since": time.time()}
        return await put_value(self.host, journal_key(self.kb_id, entry.file_id), json.dumps(payload).encode(),
                          f"the ingest journal of file {entry.file_id} in kb {self.kb_id}")

    async def read_journal(self, file_id: str) -> JournalEntry | None:
        raw = await get_value(self.host, journal_key(self.kb_id, file_id))
        try:
            data = json.loads(raw) if raw else None
            return JournalEntry(file_id, int(data["chunks"])) if isinstance(data, dict) else None
        except (ValueError, KeyError, TypeError):
            return JournalEntry(file_id, 0)  # unreadable: treat as "nothing confirmed written"

    async def delete_journal(self, file_id: str) -> bool:
        return await delete_value(self.host, journal_key(self.kb_id, file_id),
                             f"the ingest journal of file {file_id} in kb {self.kb_id}")

    # ---------------------------------------------------------------- the whole KB
    async def delete_everything(self, deadline: float = math.inf) -> bool:
        """Every key of this KB, its pending-deletion marker last. Stops at `deadline` (a KB of
        50,000 files has more keys than one invocation can delete); returns whether all are gone,
        so the caller repeats it in a later invocation."""
        snapshot = await list_keys(self.host)
        if snapshot is None:
            return False
        keys = sorted(keys_of_kb(list(snapshot.keys), self.kb_id), key=lambda k: k == pending_kb_delete_key(self.kb_id))
        ok = True
        for key in keys:
            if time.monotonic() >= deadline:
                return False
            ok = await delete_value(self.host, key, f"key {key}") and ok
        return ok

    async def mark_delete_pending(self) -> bool:
        return await put_value(self.host, pending_kb_delete_key(self.kb_id), json.dumps({"since": time.time()}).encode(),
                          f"the pending-deletion marker of kb {self.kb_id}")
