"""A KB's file records as results need them: cached, else from plugin storage, else rebuilt from
the file's vectors (then saved back); and chunks learnt from vector hits without a record.

The vector DB is the truth: a stored record whose file has no chunk-0 vector (written last by an
ingest, its completion mark) is what an earlier version left when plugin storage refused its
removal (a re-upload removed its vectors, or a failed re-upload did, and the process restarted
before the record could go). Such a record is no answer, and the file is removed (ABORTED).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from lucidrag.base.blocking import run_blocking
from lucidrag.base.host import HostApi, describe, with_retries
from lucidrag.state.kbcore import LOAD_CONCURRENCY, KbCore, decode_records
from lucidrag.state.lifecycle import FileState
from lucidrag.state.records import (
    PROBE_FILE_ID,
    ChunkRecord,
    FileRecord,
    chunk_uuid,
    merge_rebuilt,
    probe_vector_id,
    tombstone_vector_id,
)
from lucidrag.state.store import KbStore, run_bounded
from lucidrag.vectors.vectorscan import file_vectors, stored_ids

logger = logging.getLogger(__name__)

# states of a file whose stored record makes it an answer (None: unknown here, a record names it)
_ANSWERED_BY_RECORD = (None, FileState.COMMITTED, FileState.TO_INDEX, FileState.UNRECORDED)


class FileReads(KbCore):
    """Reading (and, where storage lost them, rebuilding) the records of a KB's files."""

    async def file_records(self, host: HostApi, collection_id: str, file_ids: Iterable[str],
                           unread: set[str] | None = None,
                           unconfirmed: set[str] | None = None) -> dict[str, FileRecord]:
        """The records of these files: cached, else from plugin storage, else rebuilt from the
        file's vectors (then saved back). Files with neither are left out; those whose vectors
        could not be read are added to `unread`, and those of them whose stored record the vector
        DB could not confirm (no answer until it does, vector hits included) to `unconfirmed` too."""
        out: dict[str, FileRecord] = {}
        missing: list[str] = []
        for file_id in dict.fromkeys(file_ids):
            record = self.files.unsaved_record(file_id) or self.records.get(file_id)
            if record is not None:
                out[file_id] = record
            else:
                missing.append(file_id)
        if not missing:
            return out
        store = KbStore(host, self.kb_id)
        blobs = await run_bounded([lambda f=f: store.load_record_blob(f) for f in missing], LOAD_CONCURRENCY)
        stored = {r.file_id: r for r in await run_blocking(decode_records, self.kb_id, list(zip(missing, blobs)))}
        vectorless: set[str] = set()
        unchecked: set[str] = set()
        if self.repair.trust_records:
            checked = await self._without_vectors(host, collection_id, list(stored))
            if checked is None:  # the vector DB could not say: no answer until it can (seed 4656)
                unchecked = {f for f in stored if not self.files.has_complete_vectors(f)}
                for known in (unread, unconfirmed):
                    if known is not None:
                        known |= unchecked
            vectorless = checked or set()
            for record in stored.values():
                if record.file_id not in vectorless and record.file_id not in unchecked:
                    self.records.put(record)
                    out[record.file_id] = record
            if vectorless:
                await self._remove_vectorless(host, collection_id, vectorless)
        lost = [f for f in missing if f not in out and f not in vectorless and f not in unchecked
                and f not in self.unsettled and self.may_know(f)]
        if lost and not self.fresh:
            for record in await run_bounded([lambda f=f: self._record_from_vectors(host, collection_id, f, unread)
                                             for f in lost], LOAD_CONCURRENCY):
                if record is None:
                    continue
                previous = stored.get(record.file_id)
                if previous is not None:  # a repair re-reads the vectors: never make the record worse
                    record = await run_blocking(merge_rebuilt, previous, record)
                out[record.file_id] = record
                if not self.files.is_answer(record.file_id):
                    continue  # e.g. deleted while its vectors were read: nothing may bring it back
                if record is previous:
                    self.records.put(record)
                    continue
                if previous is None and self.files.record_stored(record.file_id):
                    continue  # storage has its record and failed to read it: never overwrite it
                if self.lock.locked():
                    continue  # a change of the KB (a delete?) is under way: a later hit saves it
                async with self.lock:  # a delete landing during the save would be undone by it
                    if not self.files.is_answer(record.file_id):
                        continue
                    self.records.put(record)
                    if await self._save_record(store, record):
                        self._recorded(record.file_id)  # (UNRECORDED ->) COMMITTED
                    else:
                        self.files.move(record.file_id, FileState.UNSAVED, record)
        return out

    async def _without_vectors(self, host: HostApi, collection_id: str, file_ids: list[str]) -> set[str] | None:
        """Those of these files whose chunk-0 vector the vector DB lacks, or that have a tombstone
        (`write_tombstone`: the file failed or was deleted while storage could not say so); none
        if it may not be touched yet (`fresh`); None if it could not be asked. One listing of
        both ids."""
        first = {chunk_uuid(f, 0): f for f in file_ids if not self.files.has_complete_vectors(f)}
        if self.fresh or not first:
            return set()
        tombstones = {tombstone_vector_id(f): f for f in first.values()}
        # (and, once per process, a probe a dead process may have left: `sweep_probes`)
        look = self.probe_look_at is not None and time.monotonic() >= self.probe_look_at
        probe = [probe_vector_id(PROBE_FILE_ID)] if look else []
        try:
            present = await with_retries(lambda: stored_ids(host, collection_id, [*first, *tombstones, *probe]))
        except Exception as error:  # noqa: BLE001 - unknown: asked again by the next read
            # (a failed re-upload removed the file's vectors while storage refused the removal of
            # its record: only the vector DB can say so, so the record is no answer until it does)
            logger.warning("kb=%s: whether %d files still have their vectors could not be learnt (%s); "
                           "they are no answer until the vector DB answers", self.kb_id, len(file_ids),
                           describe(error))
            return None
        if look:
            self.probe_looked_for(probe[0] in present)
        gone = {f for chunk_id, f in first.items() if chunk_id not in present}
        gone |= {f for tombstone, f in tombstones.items() if tombstone in present}
        for file_id in set(first.values()) - gone:
            self.files.vectors_complete(file_id)
        return gone

    async def _remove_vectorless(self, host: HostApi, collection_id: str, file_ids: set[str]) -> None:
        """Committed files whose record outlived their vectors become ABORTED: no answer, and
        `reconcile` removes the record. Asked again under the KB's lock, as a re-upload of the
        file may have committed since (a change under way: a later read settles it)."""
        if self.lock.locked():
            return
        async with self.lock:
            committed = sorted(f for f in file_ids if self.files.state(f) in _ANSWERED_BY_RECORD)
            for file_id in await self._without_vectors(host, collection_id, committed) or ():
                if self.files.state(file_id) in _ANSWERED_BY_RECORD:
                    self.files.move(file_id, FileState.ABORTED, failed=True)
                    self.records.drop(file_id)
                    logger.warning("kb=%s doc=%s: its record outlived its vectors (an earlier version whose "
                                   "removal storage refused); it is removed", self.kb_id, file_id)

    async def _record_from_vectors(self, host: HostApi, collection_id: str, file_id: str,
                                   unread: set[str] | None = None) -> FileRecord | None:
        """The file's record rebuilt from its vectors, if they are all there: an ingest writes the
        batch with chunk 0 last (`ingest.upsert_order`), so vectors without chunk 0 are what an
        ingest that failed or died left (a rollback that failed where nothing durable names the
        file: storage writes failing). Such a file nothing else names is ABORTED: never an
        answer, and `reconcile` deletes its vectors."""
        first = chunk_uuid(file_id, 0)
        try:
            items = await with_retries(lambda: file_vectors(
                host, collection_id, file_id, chunk_id_at=lambda i: chunk_uuid(file_id, i)))
        except Exception as error:  # noqa: BLE001 - a result of this file is dropped, not the query
            logger.warning("kb=%s doc=%s: its record could not be read back from the vector DB (%s)",
                           self.kb_id, file_id, describe(error))
            if unread is not None:
                unread.add(file_id)
            return None
        if not items:
            if self.files.state(file_id) is FileState.UNRECORDED:
                self.files.forget(file_id)  # deleted while the index snapshot lagged
            return None
        if any(str(item.get("id")) == tombstone_vector_id(file_id) for item in items):
            # the file failed or was deleted where plugin storage could not say so, and the delete
            # of its vectors failed (`write_tombstone`)
            self._abort_leftovers(file_id, items, "a failed or deleted file")
            return None
        if not any(str(item.get("id")) == first for item in items):
            if time.monotonic() < self.previous_writes_until and unread is not None:
                unread.add(file_id)  # the previous process's last writes may still land: judged later
                return None
            self._abort_leftovers(file_id, items, "an unfinished ingest")
            return None
        record = await run_blocking(FileRecord.from_vector_items, file_id, items)
        if record.chunks:
            self.files.vectors_complete(file_id)
        return record if record.chunks else None

    def _abort_leftovers(self, file_id: str, items: list[dict[str, Any]], why: str) -> None:
        """Vectors that are `why` (what left them) and no answer: their file, if nothing else
        answers it (the index, a known commit), becomes ABORTED, and `reconcile` deletes them."""
        if self.files.state(file_id) in (None, FileState.COMMITTED, FileState.TO_INDEX) and file_id not in self.index:
            self.files.move(file_id, FileState.ABORTED)
            logger.warning("kb=%s doc=%s: %d vectors of %s found; they are removed", self.kb_id, file_id,
                           len(items), why)

    def adopt_hit(self, result: dict[str, Any]) -> ChunkRecord | None:
        """A vector search returned a chunk we have no record of (storage lost): learn it from its
        metadata so it can be returned with text and citation."""
        file_id = (result.get("metadata") or {}).get("file_id")
        return self.repair.chunk_from_hit(result) if self.may_know(str(file_id or "")) else None
