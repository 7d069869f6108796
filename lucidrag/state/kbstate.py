"""The state of one knowledge base, and the only code that changes it.

One `KnowledgeBaseState` exists per (installation, KB). Each file is in one state of its
lifecycle (`lifecycle.FileTable`; docs/DESIGN.md draws the transitions). It also holds the KB's
keyword index (a `SegmentIndex`, persisted in plugin storage as immutable segments plus a small
manifest: indexwriter.py) and a bounded cache of `FileRecord`s, which are read from plugin storage
per file when a result needs them and are never all held in memory. Everything is derived from the
host's vector DB (the source of truth). Every mutation is a method of this class: here an
ingest's begin / first write / commit / abort, retrying storage writes that failed and upkeep;
the load after a restart and indexing in kbload.py, settling journal entries in journals.py, a
file's deletion in kbcore.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from lucidrag.base.budget import BudgetSpent, holding
from lucidrag.base.host import HostApi, describe, with_retries
from lucidrag.base.writegate import GateClosed
from lucidrag.state.journals import JournalSettling
from lucidrag.state.kbload import KbLoad
from lucidrag.state.lifecycle import FileState
from lucidrag.state.records import PROBE_FILE_ID, FileRecord, probe_vector_metadata
from lucidrag.state.repairstate import RepairMode
from lucidrag.state.store import JournalEntry, KbStore
from lucidrag.state.sweeps import upsert_markers
from lucidrag.vectors.scoring import Metric

logger = logging.getLogger(__name__)

COMMIT_SAVE_ATTEMPTS = 3  # a file's record is written this often before its ingest gives up


class KnowledgeBaseState(KbLoad, JournalSettling):
    """A KB's state: every transition of its files and of its KB-level owners."""

    async def begin_ingest(self, store: KbStore, file_id: str, chunks: int, dim: int | None = None) -> bool:
        """Called before the first vector of `file_id` is written. Returns whether a restart would
        know the vectors: the journal entry is durable, or plugin storage holds nothing of the KB
        (a restart lists the vector DB: how LucidRAG works on a host whose storage writes all
        fail). If not, the file is left as it was and no vector may be written: a vector nothing
        durable names could outlive a failed rollback and a restart, and then nothing would
        remove it (or the rebuild repair would adopt a FAILED file)."""
        # Not while a change of the KB is under way: a delete of the same id (or `reconcile`'s
        # removal of a dead process's upload of it) must have landed before this upload's vectors.
        async with holding(self.lock):
            previous, facts = self.files.state(file_id), self.files.facts(file_id)
            if previous is None and not self.files.records_listed:
                # a dead process's entry may name it (storage's listing would say: `seed`)
                self.files.named_by_previous_process(file_id)
            self.files.move(file_id, FileState.INGESTING)
        for _ in range(COMMIT_SAVE_ATTEMPTS):
            if await store.write_journal(JournalEntry(file_id, chunks, dim)):
                return True
        if await self._empty_confirmed(store):
            self.files.set_unjournalled(file_id, chunks)
            return True
        if self.files.state(file_id) is FileState.INGESTING:  # back as it was
            if previous is None:  # unknown
                self.files.forget(file_id)
            else:
                self.files.move(file_id, previous, facts=facts)
        return False

    async def first_vectors_written(self, store: KbStore) -> None:
        """The KB now has vectors: clear the "never had a vector" mark at once, so that a restart
        does not take the KB for empty."""
        if self.meta.first_vectors():
            await self._save_meta(store)

    async def set_metric(self, store: KbStore, metric: Metric) -> None:
        self.meta.metric_learnt(metric)
        await self._save_meta(store)

    async def commit_ingest(self, store: KbStore, record: FileRecord,
                            mark: Callable[[], Awaitable[bool]] | None = None) -> bool:
        """The file's vectors are all written (but for its chunk-0 vector where `mark` writes it:
        a file named by storage's emptiness alone, `ingest._write_vectors`): make it known,
        durably. Returns False, changing nothing, when nothing would name the file after a restart
        (then the ingest must not report COMPLETED: the caller rolls it back).

        Durable before: the journal entry (`begin_ingest`), or nothing. Durable after: the record
        (or, if that write failed, the journal entry, which a restart adopts from the vectors, or
        the complete vectors of a KB whose storage holds nothing), and the KB's "has vectors" mark.
        So a commit that fails before `mark` leaves an incomplete file, which a restart removes."""
        file_id = record.file_id
        async with holding(self.lock):  # BudgetSpent, nothing changed, if it is not free in time
            named = await self._name_unsaved_files(store)
            if mark is not None and not (await self._holds_without_record(store, file_id) and await mark()):
                return False  # nothing could say it failed, and its vectors are incomplete
            saved = False
            for _ in range(COMMIT_SAVE_ATTEMPTS if named else 0):
                if await self._put_record(store, record):
                    saved = True
                    break
            if self.meta.dirty:
                await self._save_meta(store)
            if not saved and mark is None and not await self._holds_without_record(store, file_id):
                return False  # still INGESTING: the caller rolls back and calls `abort_ingest`
            await self._index([record])
            self.records.put(record)
            self.files.vectors_complete(file_id)
            if saved:
                self.files.record_saved(file_id)
                self.files.committed(file_id)
            else:
                self.files.move(file_id, FileState.UNSAVED, record)  # `flush` writes the record
            persisted = await self._persist_index(store)
            if saved and persisted and self.calls_may_land(file_id):
                self.files.entry_kept(file_id)  # a restart adopts it, and its upload of the id waits
            elif saved and persisted:
                await self._clear_journal(store, file_id)
            # else the journal entry stays: a restart adopts the file (and indexes it)
        return True

    async def _holds_without_record(self, store: KbStore, file_id: str) -> bool:
        """Whether a restart would know the file if its record were not saved: not if it would
        take the KB for empty (it neither adopts journal entries nor looks), nor if it would trust
        storage while the file is named by storage's emptiness alone."""
        return not (self.meta.may_say_empty or (self.files.facts(file_id).unjournalled is not None
                                                and not await self._empty_confirmed(store)))

    async def abort_ingest(self, store: KbStore, file_id: str, vectors_removed: bool, dim: int | None = None,
                           record_sent: bool = False) -> None:
        """The ingest failed: the file is never an answer again, and whatever of it is stored goes.
        If its vectors are gone, so goes any record of it, as by a delete: an older version's (the
        same document id uploaded again) or the one a failed commit sent (`record_sent`: its save
        may have landed with its answer lost, or land later). Otherwise the next reconciliation
        deletes the vectors and the record (`dim`: the vectors' dimension, for a KB that never had
        a vector); after a `record_sent`, only the next process does (TOMBSTONED)."""
        unjournalled = self.files.facts(file_id).unjournalled is not None
        if vectors_removed:
            try:
                await self.delete_file(store, file_id, record_sent=record_sent, failed=True)  # never an answer
                return
            except BudgetSpent:
                pass  # the KB's lock was not free within the hook's time: `reconcile` does it
        self.files.move(file_id, FileState.ABORTED, failed=True)  # `reconcile` removes its vectors (and record)
        self.files.set_first_write_dim(file_id, dim)
        # A restart must not take a complete set of vectors for a commit whose bookkeeping was
        # lost: the entry now says "nothing confirmed written" (best effort).
        for _ in range(COMMIT_SAVE_ATTEMPTS):
            if await store.write_journal(JournalEntry(file_id, 0, dim)):
                self.files.journal_deleted(file_id)
                if record_sent:
                    self.files.move(file_id, FileState.TOMBSTONED, failed=True)
                    self.files.set_first_write_dim(file_id, dim)
                break
        else:
            if unjournalled:  # still named by storage's emptiness alone: journalled before a first save
                self.files.set_unjournalled(file_id, 0)

    async def open_collection(self, host: HostApi, collection_id: str, dim: int, strict: bool = False) -> bool:
        """Whether the vector DB may be searched and listed for this KB now. While its collection
        may not exist (`fresh`) and is not known never to have had a vector, one vector of the
        model's dimension `dim` is upserted under PROBE_FILE_ID and deleted again: the collection
        exists from then on, with the right dimension (`remove_first_write`). With `strict`, the
        vector DB's error is raised (after the probe's cleanup) rather than answered False."""
        if not self.fresh:
            return True
        if self.never_had_vectors:
            return False  # nothing to find
        try:
            async with self.writes.write():  # never once the KB's deletion has listed what it removes
                return await self._probe(host, collection_id, dim, strict)
        except GateClosed:
            return False

    async def _probe(self, host: HostApi, collection_id: str, dim: int, strict: bool) -> bool:
        store = KbStore(host, self.kb_id)
        # the probe is a one-vector ingest: named by a journal entry (or storage's emptiness) first
        if not await self.begin_ingest(store, PROBE_FILE_ID, 0, dim):
            return False
        try:
            # as `remove_first_write`, but sweep notes found there stay for `sweep_probes`
            async with holding(self.first_write):  # (Milvus Lite's concurrent creators)
                await upsert_markers(host, collection_id, PROBE_FILE_ID, dim, self.files,
                                     [probe_vector_metadata(PROBE_FILE_ID)])
            if not await self.keep_notes_found(host, collection_id, dim):
                await with_retries(lambda: host.vector_delete(collection_id, file_ids=[PROBE_FILE_ID]))
        except Exception as error:  # noqa: BLE001 - the next query tries again
            logger.warning("kb=%s: whether its vector collection exists could not be learnt (%s)",
                           self.kb_id, describe(error))
            await self.abort_ingest(store, PROBE_FILE_ID, False, dim)  # `reconcile` removes what it left
            if strict:
                raise
            return False
        await self.abort_ingest(store, PROBE_FILE_ID, True)
        self.meta.exists()
        return True

    async def save_meta_due(self, host: HostApi, deadline: float) -> None:
        """Write the meta a save of which failed earlier (DIRTY), if any: a restart reading a stored
        "never had a vector" would not look at vectors this process left (metastate.py)."""
        if self.meta.dirty and time.monotonic() < deadline:
            await self._save_meta(KbStore(host, self.kb_id))

    async def flush(self, store: KbStore, deadline: float, save_meta: bool = True) -> None:
        """Retry the storage writes that failed earlier (without `save_meta`: but the meta, which
        the caller has tried already)."""
        if save_meta:
            await self.save_meta_due(store.host, deadline)
        for file_id, record in self.files.unsaved_records().items():
            if time.monotonic() >= deadline or not await self._name_unsaved_files(store):
                return
            async with holding(self.lock):  # a delete landing during the save would be undone by it
                if self.files.state(file_id) is not FileState.UNSAVED:
                    continue  # deleted meanwhile
                if record is not None and await self._put_record(store, record):  # UNSAVED -> COMMITTED
                    self.files.committed(file_id)
                    self._recorded(file_id)
                    if not self.snapshot.dirty:
                        await self._clear_journal(store, file_id)
        for file_id in list(self.files.of(FileState.DELETING)):
            if time.monotonic() >= deadline:
                return
            async with holding(self.lock):
                if self.files.state(file_id) is FileState.DELETING and await store.delete_record(file_id):
                    self.files.record_deleted(file_id)
                    failed = self.files.facts(file_id).failed
                    if self.calls_may_land(file_id):  # the entry goes to the next process
                        if await store.write_journal(JournalEntry(file_id, 0, self.files.late_write_dim(file_id))):
                            self.files.move(file_id, FileState.TOMBSTONED, failed=failed)  # DELETING -> TOMBSTONED
                            self.files.left_to_next_process(file_id)
                        continue
                    self.files.move(file_id, FileState.FAILED if failed else FileState.DELETED)  # DELETING -> …
                    await self._clear_journal(store, file_id)
        for file_id in list(self.files.journals_to_delete()):
            if time.monotonic() >= deadline:
                return
            if await store.delete_journal(file_id):
                self.files.journal_deleted(file_id)
        if (self.snapshot.dirty or self.snapshot.pending_drops) and time.monotonic() < deadline:
            await self._persist_index(store)
        await self.snapshot.delete_orphans(store, deadline)
        for part in sorted(self.stray_parts):
            if time.monotonic() >= deadline:
                return
            if self._being_written(part):
                continue
            if await store.delete_stray_part(part):
                self.stray_parts.discard(part)

    def needs_upkeep(self) -> bool:
        return bool(self.meta.dirty or self.unsaved or self.files.of(FileState.DELETING) or self.files.journals_to_delete()
                    or self.journals or self.snapshot.needs_upkeep()
                    or any(not self._being_written(p) for p in self.stray_parts)
                    or (self.loaded and (self.indexing or (self.repair.mode is RepairMode.TO_LOOK and not self.fresh)))
                    or self.probe_look_due() or self.probe_sweep_due())

    async def upkeep(self, host: HostApi, collection_id: str, deadline: float, index: bool = True,
                     save_meta: bool = True) -> None:
        """Continue this KB's unfinished work until `deadline`. With `index`, also index what the
        keyword index lacks, unless another hook is doing so (never wait behind it). Without
        `save_meta`, a meta still to be written is left (the caller tried it: `save_meta_due`)."""
        store = KbStore(host, self.kb_id)
        if self.loaded and self.repair.mode is RepairMode.TO_LOOK and not self.fresh:
            # storage names none of the KB's files: they are found in the vector DB before a first
            # save may end that emptiness (`_name_unsaved_files`), whatever hooks come
            self.repair.start_looking()
        await self.flush(store, deadline, save_meta)
        if not self.loaded:
            # Settling journal entries changes the index: it waits for the snapshot (within this
            # upkeep's time; then it is read on beside the hooks).
            if not self.journals or time.monotonic() >= deadline:
                return
            await self.ensure_loaded(host, collection_id, index_now=False, wait_s=deadline - time.monotonic())
            if not self.loaded:
                return
        await self.reconcile(host, collection_id, deadline)
        await self.look_for_probes(host, collection_id)
        await self.sweep_probes(host, collection_id)
        if index and self.indexing and not self.indexing_lock.locked():
            await self.continue_indexing(host, collection_id, deadline)
