"""Why a file failed to ingest, remembered per (KB, file) so the console can say it.

LangBot shows a failed upload only as a "Failed" badge; the engine's message reaches its task log.
One small JSON value per failed file, under `storage_keys.failure_key`. It is removed when the file
is deleted or a later ingest of the same document succeeds. Plugin storage is fallible: nothing
here ever raises into a hook.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from lucidrag.base.host import HostApi, describe
from lucidrag.state.saved_settings import save_creation_settings
from lucidrag.state.storage_keys import failure_file_ids, failure_key
from lucidrag.state.store import delete_value, get_value, put_value

logger = logging.getLogger(__name__)

MAX_REASON = 2000  # characters kept of a message
OUTCOME_TIMEOUT_S = 20.0  # storage may hang; the ingest result must still reach the host in time


@dataclass(frozen=True)
class FailureRecord:
    file_id: str
    reason: str
    format: str  # the upload's extension, e.g. "pdf" (the file may not have parsed far enough)
    document_name: str
    failed_at: float  # unix time
    upload_key: str = ""  # the host's storage key of the upload: the name LangBot's file list shows
    size: int = 0  # bytes

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), ensure_ascii=False).encode()

    @classmethod
    def from_bytes(cls, blob: bytes) -> FailureRecord:
        data = json.loads(blob)
        return cls(str(data["file_id"]), str(data["reason"]), str(data.get("format") or ""),
                   str(data.get("document_name") or ""), float(data.get("failed_at") or 0.0),
                   str(data.get("upload_key") or ""), int(data.get("size") or 0))


def upload_format(filename: str) -> str:
    """The extension of the host's storage key (the only meaningful part of it)."""
    base = (filename or "").rsplit("/", 1)[-1]
    return base.rsplit(".", 1)[-1].lower() if "." in base else ""


def upload_key(filename: str) -> str:
    """The host's storage key as LangBot's file list shows it (without a folder)."""
    return (filename or "").rsplit("/", 1)[-1]


def size_label(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def failed_file_name(fmt: str, size: int, at: float) -> str:
    """What tells two failed uploads apart when nothing in them was readable: format, size and
    the upload time to the second, e.g. "PDF file, 12.3 KB, 2026-12-03 19:52:20 UTC"."""
    parts = [f"{(fmt or 'unknown').upper()} file"]
    if size:
        parts.append(size_label(size))
    parts.append(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at)))
    return ", ".join(parts)


async def record_failure(host: HostApi, kb_id: str, file_id: str, reason: str, filename: str,
                         document_name: str = "", size: int = 0) -> bool:
    fmt = upload_format(filename)
    now = time.time()
    record = FailureRecord(file_id, reason[:MAX_REASON], fmt, document_name or failed_file_name(fmt, size, now),
                           now, upload_key(filename), size)
    return await put_value(host, failure_key(kb_id, file_id), record.to_bytes(),
                           f"why file {file_id} of kb {kb_id} failed")


async def forget_failure(host: HostApi, kb_id: str, file_id: str) -> bool:
    return await delete_value(host, failure_key(kb_id, file_id), f"the failure record of file {file_id} in kb {kb_id}")


async def list_failures(host: HostApi, kb_id: str, keys: list[str]) -> list[FailureRecord]:
    """The KB's failure records, newest first; unreadable ones are skipped. `keys` is a full
    listing of plugin storage keys (the caller lists once for everything it shows)."""
    out: list[FailureRecord] = []
    for file_id in failure_file_ids(keys, kb_id):
        blob = await get_value(host, failure_key(kb_id, file_id))
        try:
            if blob is not None:
                out.append(FailureRecord.from_bytes(blob))
        except (ValueError, KeyError, TypeError) as error:
            logger.info("kb=%s file=%s: unreadable failure record (%s)", kb_id, file_id, error)
    out.sort(key=lambda r: r.failed_at, reverse=True)
    return out


async def remember_outcome(host: HostApi, kb_id: str, file_id: str, error_message: str | None,
                           filename: str, creation_settings: Mapping[str, Any] | None, size: int = 0) -> None:
    """After an ingest: keep the KB's settings (for the console; None = already saved by this
    process) and record or clear the file's failure. Bounded in time and never raises: the ingest
    result must reach the host."""
    async def remember() -> None:
        if creation_settings is not None:
            await save_creation_settings(host, kb_id, creation_settings)
        if error_message is not None:
            await record_failure(host, kb_id, file_id, error_message, filename, size=size)
        else:
            await forget_failure(host, kb_id, file_id)
    try:
        await asyncio.wait_for(remember(), OUTCOME_TIMEOUT_S)
    except Exception as error:  # noqa: BLE001
        logger.warning("kb=%s file=%s: could not record the ingest outcome (%s)", kb_id, file_id, describe(error))
