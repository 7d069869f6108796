"""Settling journal entries: crash safety of ingests.

Before an ingest writes its first vector it records a journal entry (file id, number of chunks,
vector dimension). Commit saves the FileRecord, indexes it, persists the index, and removes the
entry. An entry found after a restart belongs to an ingest that never committed: if every chunk's
vector is there, the ingest finished and only its bookkeeping was lost, so the file is adopted from
its vectors; otherwise its vectors are orphans and are deleted (the file is FAILED). Journal entries
of ingests running in this process are never touched. A deleted or failed file whose record may
still be (or later be) in storage keeps an entry "0 chunks", which makes a restart remove the
record instead of indexing it (`KbCore.delete_file`). On a KB that never had a vector, a write
whose outcome is unknown is removed without letting Milvus create a wrong collection
(`remove_first_write`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from lucidrag.base.blocking import run_blocking
from lucidrag.base.budget import holding
from lucidrag.base.host import HostApi, describe, with_retries
from lucidrag.state.latewrites import PREVIOUS_PROCESS_LANDING_S, LateWriteNotes, LostAnswers, delete_file_vectors
from lucidrag.state.lifecycle import FileState
from lucidrag.state.metastate import Mark
from lucidrag.state.records import (
    PROBE_FILE_ID,
    FileRecord,
    chunk_uuid,
    is_chunk_vector,
    probe_vector_metadata,
    tombstone_vector_metadata,
)
from lucidrag.state.store import JournalEntry, KbStore, StorageReadFailed
from lucidrag.state.sweeps import ProbeSweeps, sweep_note_markers, upsert_markers
from lucidrag.vectors.vectorscan import LIST_WINDOW, file_vectors

logger = logging.getLogger(__name__)


class JournalSettling(ProbeSweeps):
    """Settling journal entries left by ingests that never committed, and first writes."""

    async def reconcile(self, host: HostApi, collection_id: str, deadline: float) -> None:
        """Settle journal entries of ingests that never committed (see the module docstring)."""
        store = KbStore(host, self.kb_id)
        for file_id in sorted(self.journals):
            if time.monotonic() >= deadline:
                return
            dim = self.files.first_write_dim(file_id)
            if dim is None and self.files.state(file_id) is FileState.ABORTED:
                dim = self.files.late_write_dim(file_id)  # (a probe of its removal whose answer was lost)
            if self.fresh and not self.never_had_vectors and dim is None:
                continue  # whether the collection exists is unknown yet: no call may create it
            if self.files.state(file_id) is FileState.ABORTED:  # its vectors go, whatever storage holds
                failed = self.files.facts(file_id).failed  # (else deleted before they could be touched)
                # `only`: another hook's `reconcile` may have settled it meanwhile (TOMBSTONED, its
                # entry carrying the dimension a late write's removal needs): never again (seed 5640).
                # The removal goes under the KB's lock, after the entry "0 chunks" that names it
                # (`delete_file`), so an upload of the id begins after it and a restart knows of it.
                remove = (self.first_write_remover(host, store, collection_id, file_id, dim) if self.fresh
                          else self._vectors_remover(host, collection_id, file_id))
                await self.delete_file(store, file_id, remove, failed=failed,  # ABORTED -> FAILED / DELETED
                                       only=FileState.ABORTED)
                continue
            try:
                entry = await store.read_journal(file_id, strict=True)
            except StorageReadFailed:
                continue  # unknown yet: it stays JOURNALLED (no answer) for a later upkeep
            if entry is None:  # settled by another process: JOURNALLED -> as it is
                self._settled_elsewhere(file_id)
                continue
            if self.meta.mark is Mark.NONE_YET:
                # The stored mark says the KB never got its first vector (it is cleared right after
                # the first upsert; a file that COMPLETED while it could not be cleared has its
                # record, since a commit there needs one). A file with a record and an entry of its
                # chunks committed and only its entry was left: as it is. Any other is no answer
                # ("0 chunks": failed or deleted, whatever record it has included): whatever its
                # write (of a dead process, or a failed one) left goes, without letting Milvus
                # create a wrong collection; an entry older than `dim` has nothing to re-create it
                # with, and only its record goes.
                if not self.files.records_listed:
                    continue  # which files have a record is not known yet
                recorded = self.files.record_stored(file_id)
                if (recorded and entry.chunks > 0) or (entry.dim is None and not recorded):
                    self._settled_elsewhere(file_id)  # committed, or nothing of it was ever written
                    await self._clear_journal(store, file_id)
                    continue
                if self._previous_writes_may_land():
                    continue
                if entry.dim is None:
                    await self.delete_file(store, file_id)  # JOURNALLED -> DELETED
                    continue
                if entry.chunks and not await store.write_journal(JournalEntry(file_id, 0, entry.dim)):
                    continue  # a restart must never adopt the probe `remove_first_write` writes
                await self.delete_file(store, file_id, self.first_write_remover(  # JOURNALLED -> FAILED / DELETED
                    host, store, collection_id, file_id, entry.dim), failed=entry.chunks > 0)
                continue
            if file_id == PROBE_FILE_ID:  # a dead process's query probe: its vectors go with the
                # sweep, after the files of any sweep notes beside it (a delete by its id would take
                # the notes, and their files' vectors would be named by nothing)
                self.sweep_later(self.previous_writes_until)
                await self.delete_file(store, file_id, only=FileState.JOURNALLED)
                continue
            # past Milvus' listing window the journalled count's chunk ids are read by id
            ids = [chunk_uuid(file_id, i) for i in range(entry.chunks)] if entry.chunks > LIST_WINDOW else []
            items = await with_retries(lambda f=file_id: file_vectors(host, collection_id, f, ids))
            chunk_items = [i for i in items if is_chunk_vector(i.get("id"), i.get("metadata"))]
            if entry.chunks > 0 and len(chunk_items) >= entry.chunks:
                record = await run_blocking(FileRecord.from_vector_items, file_id, items)
                async with holding(self.lock):  # JOURNALLED -> COMMITTED (or UNSAVED)
                    if self.files.state(file_id) is not FileState.JOURNALLED:
                        continue  # deleted (or settled) meanwhile
                    stored = await store.load_record(file_id)
                    record = stored if stored is not None and len(stored.chunks) == len(record.chunks) else record
                    await self._index([record])
                    saved = stored is record or await self._save_record(store, record)
                    if saved:
                        self.files.committed(file_id)
                        self.files.record_saved(file_id)
                    else:
                        self.files.move(file_id, FileState.UNSAVED, record)
                    if await self._persist_index(store) and saved:
                        await self._clear_journal(store, file_id)
                    elif saved:
                        self.files.journal_left(file_id)  # the entry goes with the next flush
                    # else the entry is all that names the file: `flush` clears it with the record
                logger.info("kb=%s doc=%s: adopted an ingest that finished before a restart (%d chunks)",
                            self.kb_id, file_id, len(items))
            else:
                # an ingest cut off (FAILED), or the tombstone "0 chunks" of a file deleted or failed
                waiting = self._previous_writes_may_land()
                if items and (entry.chunks > 0 or not waiting):
                    async with holding(self.lock):  # not while an upload of the same id begins
                        if self.files.state(file_id) is not FileState.JOURNALLED:
                            continue  # uploaded again (or settled) meanwhile: its vectors are its own
                        await delete_file_vectors(host, self.files, collection_id, [file_id])
                    logger.warning("kb=%s doc=%s: removed %d vectors an interrupted ingest left behind",
                                   self.kb_id, file_id, len(items))
                if waiting:
                    continue  # the entry stays (no answer): a later upkeep removes what lands meanwhile
                await self.delete_file(store, file_id, failed=entry.chunks > 0, only=FileState.JOURNALLED)

    def _vectors_remover(self, host: HostApi, collection_id: str, file_id: str) -> Callable[[], Awaitable[None]]:
        """`delete_file`'s `delete_vectors`: one delete by file id (retried), noted if its answer is lost."""
        return lambda: delete_file_vectors(host, self.files, collection_id, [file_id])

    def _previous_writes_may_land(self) -> bool:
        """Whether a write of the process that left a journal entry may still land (an upsert
        LangBot carries on with after a restart): the entry is kept until then (JOURNALLED: no
        answer) and what lands meanwhile is removed by a later upkeep, as a write landing after the
        entry went would stay for good."""
        return time.monotonic() < self.previous_writes_until

    def _settled_elsewhere(self, file_id: str) -> None:
        """JOURNALLED -> COMMITTED (TO_INDEX while the index lacks it) if storage has its record
        or the index names it, else forgotten."""
        stored = self.files.record_stored(file_id)
        if not stored and file_id not in self.index:
            self.files.forget(file_id)
            return
        self.files.committed(file_id)
        if stored and file_id not in self.index and self.loaded:
            self.files.to_index(file_id)

    async def first_write_of(self, store: KbStore, file_id: str) -> int | None:
        """On a KB that never had a vector: the dimension of a write of `file_id` whose outcome is
        unknown and not settled yet (ABORTED here, or journalled by a dead process), else None.
        StorageReadFailed if its journal entry could not be read."""
        known = self.files.first_write_dim(file_id)
        if known is not None:
            return known
        if self.files.state(file_id) not in (FileState.JOURNALLED, None):  # (None: a dead process's entry, unlisted)
            return None
        entry = await store.read_journal(file_id, strict=True)
        return entry.dim if entry is not None else None

    def first_write_remover(self, host: HostApi, store: KbStore, collection_id: str, file_id: str,
                            dim: int | None = None) -> Callable[[], Awaitable[None]]:
        """`delete_file`'s `delete_vectors` for a file of a KB that never had a vector: runs
        `remove_first_write` (with `dim`, else `first_write_of`) if a write of the file with an
        unknown outcome is still unsettled once the KB's lock is held. Under the lock, since its
        upsert must not land after another hook removed the file (nothing would remove it then)."""
        async def remove() -> None:
            if self.files.state(file_id) not in (FileState.JOURNALLED, FileState.ABORTED, None):
                return  # settled meanwhile
            known = dim if dim is not None else await self.first_write_of(store, file_id)
            if known is not None:
                await self.remove_first_write(host, collection_id, file_id, known)
        return remove

    async def remove_first_write(self, host: HostApi, collection_id: str, file_id: str, dim: int) -> None:
        """Delete every vector of `file_id` from a KB that never had a vector, after a write whose
        outcome is unknown (its answer was lost, or the process died): the collection exists only
        if LangBot got that far, and a delete from a missing one makes LangBot's Milvus adapter
        create it with dimension 1536. So first one vector of the file's own dimension is upserted
        for it (every adapter's upsert creates a missing collection with the vector's dimension,
        and writes into an existing one), then the file's vectors are deleted by file id, that
        one included. Raises if either call fails (nothing is then known to be removed).

        The probe goes under the file's own id where something durable names the removal (its
        journal entry, which a restart settles again) or where a restart lists the vector DB
        (storage holds nothing of the KB: a probe left there is found, `_record_from_vectors`).
        Otherwise (plugin storage refuses the entry, on a KB that had vectors) a probe landing after
        the delete, or left by a process that died between the two calls, would be named by
        nothing: it goes under PROBE_FILE_ID instead, which is swept (`sweep_probes`) -- but not
        while the stored meta, unread, may say "never had a vector": no process sweeps such a KB's
        collection, while this process's `reconcile` removes the file's vectors once it has read
        the meta (seed 2421). There the probe carries a sweep note for a process that reads a
        meta saying the KB had vectors (seeds 2781, 5722: this one died first)."""
        named = await self._removal_named(host, file_id)
        probe_file = file_id if named or (self.meta.may_say_empty and self.meta.mark is not Mark.SOME) \
            else PROBE_FILE_ID
        note = None if named or probe_file != file_id else (
            lambda: self.send_sweep_note(host, collection_id, file_id, dim))
        try:
            await remove_first_write(host, collection_id, file_id, dim, self.first_write, self.files, probe_file, note)
        except BaseException:
            # kept with the file (ABORTED): a later removal re-creates the collection with it
            self.files.set_first_write_dim(file_id, dim)
            raise
        finally:
            if probe_file == PROBE_FILE_ID:  # swept at once, or once it can no longer land if an
                # answer was lost (only where a restart looks, above); re-created with `dim` first
                # while the collection may be missing
                wait = PREVIOUS_PROCESS_LANDING_S if self.files.may_land(file_id) else 0.0
                self.note_dim = dim
                self.schedule_sweep(time.monotonic() + wait)
        self.files.set_first_write_dim(file_id, None)

    async def _removal_named(self, host: HostApi, file_id: str) -> bool:
        """Whether a restart would settle the removal of `file_id`'s vectors again: the file is
        the query's probe, storage holds nothing of the KB (a restart lists the vector DB), or the
        file's journal entry is stored. (Also on a KB that never had a vector: a later process may
        not touch its collection to sweep PROBE_FILE_ID, while the entry may yet land.)"""
        if file_id == PROBE_FILE_ID or self.never_had_vectors or self._emptiness_may_name_files():
            return True
        try:
            return await KbStore(host, self.kb_id).read_journal(file_id, strict=True) is not None
        except StorageReadFailed:
            return False

    async def write_tombstone(self, host: HostApi, collection_id: str, file_id: str, dim: int) -> None:
        """The file failed or was deleted, the delete of its vectors failed, and plugin storage
        refused to note it: one vector of `dim` (the model's) under the file's id, `vector_kind`
        "tombstone", says so to a restart, which removes the file instead of answering its record
        (`_without_vectors`) or adopting its vectors (`_record_from_vectors`). A delete of the
        file's vectors removes it with them. A restart that never meets the file (there was no
        earlier version) finds its sweep note instead (`sweep_probes`; seed 262). Raises if it
        could not be written."""
        self.note_for_sweep(file_id, dim)  # in the same call: a process killed after it leaves both
        lost = LostAnswers()
        try:
            await upsert_markers(host, collection_id, file_id, dim, _Both(self.files, lost),
                                  [tombstone_vector_metadata(file_id), *sweep_note_markers(file_id)])
        except Exception:
            if lost.lost and self.meta.mark is not Mark.SOME:  # the note may have been written (seed 4416)
                await self.withdraw_note_unless_looked_for(host, collection_id, file_id, dim, upserted=False)
            raise
        if self.fresh:  # its removal re-creates the collection first (`first_write_remover`)
            self.files.set_first_write_dim(file_id, dim)
        if self.meta.mark is not Mark.SOME:
            await self._remove_unlooked_for_tombstone(host, collection_id, file_id)
        await self.withdraw_note_unless_looked_for(host, collection_id, file_id, dim)

    async def _remove_unlooked_for_tombstone(self, host: HostApi, collection_id: str, file_id: str) -> None:
        """A restart that reads "never had a vector" looks for neither the tombstone nor the note,
        and this process may die before its `reconcile` (seed 4822): the tombstone's upsert made
        the collection, so the file's vectors go at once, the tombstone with them. Best effort."""
        try:
            await delete_file_vectors(host, self.files, collection_id, [file_id])
        except Exception as error:  # noqa: BLE001 - the tombstone stays for this process's `reconcile`
            logger.warning("kb=%s doc=%s: the vectors of a failed upload could not be removed now (%s)",
                           self.kb_id, file_id, describe(error))


async def remove_first_write(host: HostApi, collection_id: str, file_id: str, dim: int,
                             first_write: asyncio.Lock | None = None, late_writes: LateWriteNotes | None = None,
                             probe_file: str | None = None,
                             note: Callable[[], Awaitable[None]] | None = None) -> None:
    """`KnowledgeBaseState.remove_first_write` (also for a KB being deleted, which has no state);
    the probe under `probe_file` (default: `file_id`; another, PROBE_FILE_ID, is left for
    `sweep_probes`, which first removes the files of the sweep notes beside it: a delete by that
    id would take the notes with it, and their files' vectors would be named by nothing). `note`
    is awaited if vectors of the file may be left (a delete failed, or an upsert's answer was lost:
    it may land after the delete) once the probe's upsert has answered (the collection exists)."""
    probe_file = probe_file or file_id
    lost = LostAnswers()
    notes = _Both(late_writes, lost) if late_writes is not None else lost
    upserted = False
    try:
        # concurrent creators race on Milvus Lite; not waited for past the hook's deadline (an
        # upload's first write may take its SDK timeouts). The probe's id is no chunk's: never
        # taken for chunk 0, the completion mark.
        async with holding(first_write or asyncio.Lock()):
            await upsert_markers(host, collection_id, file_id, dim, notes, [probe_vector_metadata(probe_file)])
        upserted = True
        await with_retries(lambda: host.vector_delete(collection_id, file_ids=[file_id]))
    except Exception:
        if note is not None and upserted:
            await note()
        raise
    if lost.lost and note is not None:
        await note()


class _Both:
    """Late-write notes kept in two places."""

    def __init__(self, first: LateWriteNotes, second: LateWriteNotes) -> None:
        self.first, self.second = first, second

    def unanswered(self, file_id: str, dim: int | None = None) -> None:
        self.first.unanswered(file_id, dim)
        self.second.unanswered(file_id, dim)
