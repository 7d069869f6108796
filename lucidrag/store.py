"""Persisting FileRecords in the host's plugin storage.

Plugin storage has no KB dimension, so every key carries the KB id. Storage is fallible (a host
with SQLAlchemy 2.1 fails every write): every method here either succeeds or returns a falsy
value and logs; nothing raises into ingest, retrieve or delete. The vector DB stays the source of
truth; a missing record is rebuilt from `vector_list`.
"""

from __future__ import annotations

import logging

from .host import HostApi, describe
from .records import FileRecord
from .storage_keys import file_record_key, file_record_part_key, record_file_ids

logger = logging.getLogger(__name__)

PART_SIZE = 4 * 1024 * 1024  # bytes per storage value; big files are stored in parts
_SINGLE = b"Z"
_PARTS = b"P"


class RecordStore:
    def __init__(self, host: HostApi) -> None:
        self.host = host

    async def save(self, kb_id: str, record: FileRecord) -> bool:
        key = file_record_key(kb_id, record.file_id)
        blob = record.to_bytes()
        try:
            if len(blob) <= PART_SIZE:
                await self.host.set_plugin_storage(key, _SINGLE + blob)
                return True
            parts = [blob[i : i + PART_SIZE] for i in range(0, len(blob), PART_SIZE)]
            for n, part in enumerate(parts):
                await self.host.set_plugin_storage(file_record_part_key(kb_id, record.file_id, n), part)
            await self.host.set_plugin_storage(key, _PARTS + str(len(parts)).encode())
            return True
        except Exception as error:  # noqa: BLE001 - storage is best effort by contract
            logger.warning("kb=%s file=%s: could not save file record (%s); it will be rebuilt "
                           "from the vector DB when needed", kb_id, record.file_id, describe(error))
            return False

    async def load(self, kb_id: str, file_id: str) -> FileRecord | None:
        key = file_record_key(kb_id, file_id)
        try:
            head = await self.host.get_plugin_storage(key)
            if not head:
                return None
            if head[:1] == _SINGLE:
                return FileRecord.from_bytes(head[1:])
            if head[:1] == _PARTS:
                count = int(head[1:])
                parts = [await self.host.get_plugin_storage(file_record_part_key(kb_id, file_id, n)) for n in range(count)]
                return FileRecord.from_bytes(b"".join(parts))
            raise ValueError("unknown record header")
        except Exception as error:  # noqa: BLE001
            logger.warning("kb=%s file=%s: could not load file record (%s)", kb_id, file_id, describe(error))
            return None

    async def file_ids(self, kb_id: str) -> list[str] | None:
        """File ids with a stored record in this KB, or None when storage is unavailable."""
        try:
            keys = await self.host.get_plugin_storage_keys()
        except Exception as error:  # noqa: BLE001
            logger.warning("kb=%s: could not list plugin storage (%s)", kb_id, describe(error))
            return None
        return record_file_ids(keys, kb_id)

    async def delete(self, kb_id: str, file_id: str) -> bool:
        key = file_record_key(kb_id, file_id)
        try:
            head = await self.host.get_plugin_storage(key)
        except Exception:  # noqa: BLE001 - a missing key may raise; deleting it is still fine
            head = b""
        try:
            if head[:1] == _PARTS:
                for n in range(int(head[1:])):
                    await self.host.delete_plugin_storage(file_record_part_key(kb_id, file_id, n))
            await self.host.delete_plugin_storage(key)
            return True
        except Exception as error:  # noqa: BLE001
            logger.warning("kb=%s file=%s: could not delete file record (%s)", kb_id, file_id, describe(error))
            return False
