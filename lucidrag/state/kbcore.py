"""The fields of one knowledge base's state, what they say, and the steps every transition is
made of: changing the keyword index, writing records, the meta and the index snapshot, deleting
a file. The transitions themselves are in kbstate.py (ingest, flush, upkeep), kbload.py (the load
after a restart, indexing), journals.py (settling journal entries) and filereads.py (records read
or rebuilt for results); each KB-level state machine has its own owner (loadstate.py,
metastate.py, repairstate.py, indexwriter.py) and every file's state is in lifecycle.FileTable.

CPU work (decoding, tokenising, index updates) runs in threads; the index is only read or changed
under `index_guard`, so a query never sees it half-updated and the event loop never stalls on it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace

from lucidrag.base.blocking import run_blocking
from lucidrag.base.budget import BudgetSpent, budget, holding, remaining
from lucidrag.base.host import HostApi, describe, with_retries
from lucidrag.base.writegate import WriteGate
from lucidrag.index.segindex import KeywordHit, SegmentIndex
from lucidrag.index.terms import TokenizedChunk, tokenize_chunks
from lucidrag.state.indexwriter import IndexSnapshotWriter
from lucidrag.state.lifecycle import FileState, FileTable, NotAnswers
from lucidrag.state.loadstate import LoadState
from lucidrag.state.metastate import Mark, MetaState, Presence
from lucidrag.state.recordcache import RecordCache
from lucidrag.state.records import FileRecord
from lucidrag.state.repairstate import RepairMode, RepairState
from lucidrag.state.storage_keys import file_record_key, part_owner
from lucidrag.state.latewrites import storage_key_quiet_at, storage_writes_may_land
from lucidrag.state.store import JournalEntry, KbStore, KeySnapshot, StorageReadFailed, decode_record, list_keys
from lucidrag.vectors.scoring import Metric

logger = logging.getLogger(__name__)

LOAD_CONCURRENCY = 8  # storage reads in flight while loading records
FIND_FILES_SLICE_S = 3.0  # of a hook, at most, finding the KB's files in the vector DB before a save
# a file in one of these states may have its record written by this process at any moment
_RECORD_MAY_BE_WRITTEN = (FileState.INGESTING, FileState.JOURNALLED, FileState.ABORTED, FileState.UNSAVED,
                          FileState.TOMBSTONED)
# a file in one of these states is committed: its vectors are answers
_COMMITTED = (FileState.COMMITTED, FileState.TO_INDEX, FileState.UNSAVED)
# ... and so are an UNRECORDED file's, which the index snapshot names
_NAMED = (*_COMMITTED, FileState.UNRECORDED)


@dataclass(frozen=True)
class FileDeletion:
    """What `KbCore.delete_file` did: whether the deletion is durable and, where nothing was
    deleted because an upsert of the file may still land with no journal entry to name its
    removal, until when (`writes_land_until`, a monotonic time; 0.0 for any other reason)."""

    durable: bool
    writes_land_until: float = 0.0


DELETED = FileDeletion(durable=True)
NOT_DELETED = FileDeletion(durable=False)


@dataclass
class KbCore:
    """The fields of a KB's state, their reads, and the steps transitions share."""

    kb_id: str
    index: SegmentIndex = field(default_factory=SegmentIndex)
    records: RecordCache = field(default_factory=RecordCache)
    meta: MetaState = field(default_factory=MetaState)  # the stored meta and the collection
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # mutations and the first load
    writes: WriteGate = field(default_factory=WriteGate)  # an ingest's writes; closed when the KB is deleted
    index_guard: asyncio.Lock = field(default_factory=asyncio.Lock)  # index changes and searches
    load: LoadState = field(default_factory=LoadState)  # the load after a restart
    first_write: asyncio.Lock = field(default_factory=asyncio.Lock)  # one creates the collection
    files: FileTable = field(default_factory=FileTable)  # every file's state, and its keys in storage
    repair: RepairState = field(default_factory=RepairState)  # finding files in the vector DB
    snapshot: IndexSnapshotWriter = field(default_factory=IndexSnapshotWriter)  # the index in plugin storage
    stray_parts: set[str] = field(default_factory=set)  # part keys listed without their header
    indexing_lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one `continue_indexing` at a time
    # until then a write of the previous process may still land: `reconcile` keeps its entries
    previous_writes_until: float = 0.0
    # from then on PROBE_FILE_ID's vectors are deleted (`sweep_probes`): a removal of this process
    # that nothing durable named may have left its probe there; None: nothing to do
    probe_sweep_at: float | None = None
    # from then on the next chunk-0 listing (`_without_vectors`), or else upkeep, looks once for
    # such a probe that a dead process left (then it is swept); None: looked
    probe_look_at: float | None = None
    # files this process wrote a sweep note for (`JournalSettling.note_for_sweep`), how many notes
    # it sent, and their vectors' dimension (what a sweep of a collection that may be missing
    # re-creates it with)
    noted: set[str] = field(default_factory=set)
    notes_sent: int = 0
    note_dim: int | None = None
    # the files the sweep notes under PROBE_FILE_ID named at its last listing for an upload
    # (`ProbeSweeps.look_for_dead_notes`; None: not listed), and whether no dead process's note can
    # land any more since (then no later listing is needed)
    dead_notes: frozenset[str] | None = None
    dead_notes_final: bool = False
    dead_notes_lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one listing at a time
    # a save of a record, the meta or the index failed while storage held nothing of the KB: it may
    # have landed all the same (LangBot may do a write whose answer the plugin never gets), so that
    # emptiness names no new file until a listing shows it still holds nothing (`_empty_confirmed`)
    emptiness_doubted: bool = False

    @property
    def loaded(self) -> bool:
        return self.load.loaded

    def known_files(self) -> set[str]:
        """Files that are ingested and committed (indexed, or waiting to be)."""
        return self.index.file_ids() | set(self.to_index)

    @property
    def to_index(self) -> Mapping[str, None]:
        """Committed files the keyword index lacks yet, in the order they are indexed (TO_INDEX)."""
        return self.files.of(FileState.TO_INDEX)

    def has_files(self) -> bool:
        return len(self.index) > 0 or bool(self.to_index)

    @property
    def fresh(self) -> bool:
        """The KB's collection may not exist: nothing may touch the vector DB but an upsert of the
        model's vectors (metastate.py)."""
        return self.meta.fresh

    @property
    def never_had_vectors(self) -> bool:
        """This KB never had a vector (the stored mark says so, or this process created it), and
        nothing here says otherwise (not merely unknown, as while the meta cannot be read or
        storage holds nothing of the KB: `fresh` covers that too)."""
        return self.meta.never_had_vectors

    @property
    def metric(self) -> Metric | None:
        return self.meta.metric

    @property
    def indexing(self) -> bool:
        """The keyword index does not cover every file yet (see `continue_indexing`)."""
        return bool(self.to_index) or self.repair.discovery is not None

    @property
    def unsettled(self) -> NotAnswers:
        """Files whose vectors are no answers: ingests running here, journalled by a dead process
        or failed, and files deleted by this process (lifecycle.NOT_ANSWERS)."""
        return self.files.not_answers()

    @property
    def in_flight(self) -> set[str]:
        return set(self.files.of(FileState.INGESTING))

    @property
    def being_removed(self) -> set[str]:
        """Deleted or failed files whose journal entry ("0 chunks") makes a restart remove what is
        left of them: no interrupted ingest."""
        return set(self.files.of(FileState.DELETING)) | set(self.files.of(FileState.TOMBSTONED))

    @property
    def journalled_on_purpose(self) -> set[str]:
        """Files whose journal entry is no interrupted upload: ingests under way, removals and
        commits whose entry waits for the next process (a call of theirs may still land)."""
        return self.in_flight | self.being_removed | self.files.kept_for_next_process()

    @property
    def journals(self) -> set[str]:
        """Files whose vectors `reconcile` settles: journalled by a dead process, or failed here."""
        return set(self.files.of(FileState.JOURNALLED)) | set(self.files.of(FileState.ABORTED))

    @property
    def unsaved(self) -> Mapping[str, FileRecord | None]:
        """Committed files whose record `flush` still has to write (file id -> record)."""
        return self.files.unsaved_records()

    @property
    def loading(self) -> bool:
        """The index snapshot is being read from storage (beside the hooks: `load_beside`)."""
        return self.load.reading

    async def keyword_search(self, query: str, top_k: int, file_ids: set[str] | None = None) -> list[KeywordHit]:
        async with self.index_guard:
            return await run_blocking(self.index.search, query, top_k, file_ids)

    def may_know(self, file_id: str) -> bool:
        """Whether vectors of this file may be an answer: it is committed (its record saved or not
        yet), the index snapshot named it (its record was lost), or the index is not complete yet.
        Once it is, vectors of a file nothing names are what a failed ingest could not remove
        (storage and the vector DB failed at once): never answers. While the snapshot is still
        being read, a stored record names it."""
        return self.files.is_answer(file_id) and (
            self.indexing or self.files.state(file_id) in _NAMED
            or (self.loading and self.files.record_stored(file_id)))

    def _recorded(self, file_id: str) -> None:
        """The file's record was just saved. A file the keyword index lacks (the snapshot named it
        without a record, so the load took it out: UNRECORDED; or only a segment held in memory
        named it before a restart) is indexed from it, so UNRECORDED files only leave after the load."""
        self.files.record_saved(file_id)
        if self.files.state(file_id) is FileState.UNRECORDED:
            self.files.committed(file_id)
        if self.loaded and file_id not in self.index and file_id not in self.in_flight:
            self.files.to_index(file_id)

    def has_committed(self, file_id: str) -> bool:
        """Whether this process knows the file as committed (indexed, to be indexed, or with a
        stored record) in a collection that exists: a version of it may be answered. (While a
        re-upload runs, the earlier version stays in the keyword index.)"""
        return not self.fresh and (self.files.state(file_id) in _COMMITTED or file_id in self.index
                                   or self.files.record_stored(file_id))

    def may_have_committed(self, file_id: str) -> bool:
        """`has_committed`, or storage has its record (also while the collection may not exist,
        the meta unread: seed 4679), or this process cannot tell: the KB may have had vectors and
        plugin storage could not be listed, or holds nothing of the KB (its files are in the
        vector DB alone) while they are still being found there."""
        if (self.has_committed(file_id) or self.files.record_stored(file_id)
                or self.files.state(file_id) is FileState.JOURNALLED):
            return True  # (a dead process's upload of it, which `reconcile` would adopt if complete)
        return self.files_unseen() or (not self.never_had_vectors and (
            file_id in self.index or self.files.state(file_id) is FileState.TO_INDEX or not self.files.records_listed))

    def files_unseen(self) -> bool:
        """Plugin storage names none of the KB's files, and the vector DB may hold some that were
        not found there yet: whether a file id unknown here is one of them only the vector DB can
        tell."""
        return (not self.never_had_vectors and self._emptiness_may_name_files()
                and (self.repair.finding_files or not self.loaded))

    def only_the_vector_db_knows(self, file_id: str) -> bool:
        """Whether only the vector DB can tell if it holds vectors of this file (`files_unseen`,
        and nothing here names the file)."""
        return (self.files_unseen() and self.files.state(file_id) is None
                and not self.files.record_stored(file_id))

    def seed(self, snapshot: KeySnapshot) -> None:
        """Learn which files have records and journal entries from a storage listing, unless this
        process already knows (every later change of this KB went through this object)."""
        if not self.files.records_listed:
            self.files.listed(snapshot.record_ids(self.kb_id))
            for file_id in snapshot.journal_ids(self.kb_id):
                # this process knows better about its own files (but a committed one's entry outlived it)
                if self.files.state(file_id) in (None, FileState.COMMITTED):
                    self.files.move(file_id, FileState.JOURNALLED)
                    # a call of the process that wrote the entry may still land: an upload of the
                    # id waits for it, also once `reconcile` has settled the file
                    self.files.named_by_previous_process(file_id)
            # segments a manifest names (stored, or about to be) are not orphans, whenever the listing comes
            self.snapshot.listed(snapshot.index_segments(self.kb_id))
            self.stray_parts |= set(snapshot.stray_parts(self.kb_id))
            self.meta.listed(snapshot.has_meta(self.kb_id))
            if snapshot.record_ids(self.kb_id):
                self.meta.records_found()
            if self.loaded:  # the listing failed at load: index the records the snapshot lacks now
                indexed = self.index.file_ids()
                for file_id in sorted(self.files.with_stored_record() - indexed - self.in_flight):
                    self.files.to_index(file_id)
                if (self._emptiness_may_name_files() and self.meta.mark is not Mark.NONE_YET
                        and self.repair.mode is RepairMode.IDLE):
                    self.repair.storage_knows_nothing()  # its files are to be found in the vector DB

    def calls_quiet_at(self, file_id: str) -> float:
        """When no call of the file whose answer was lost (a write, a delete of its vectors or of
        its record), nor one of a dead process whose entry named it, can land any more (0.0: none)."""
        previous = self.previous_writes_until if self.files.previous_process_named(file_id) else 0.0
        return max(self.files.calls_quiet_at(file_id), storage_key_quiet_at(file_record_key(self.kb_id, file_id)),
                   previous)

    def vector_writes_quiet_at(self, file_id: str) -> float:
        """When no upsert of the file's vectors that this process gave up on, nor one of a dead
        process whose entry named it, can land any more (0.0: none)."""
        at = self.files.calls_quiet_at(file_id) if self.files.may_land(file_id) else 0.0
        return max(at, self.previous_writes_until if self.files.previous_process_named(file_id) else 0.0)

    def calls_may_land(self, file_id: str) -> bool:
        """A call of the file may still land: removing it leaves its entry "0 chunks" for the next
        process (TOMBSTONED), whose upload of the id waits for them too."""
        return self.files.may_land(file_id) or time.monotonic() < self.calls_quiet_at(file_id)

    def created(self) -> None:
        """The KB was created by this process: it has no vector yet (`MetaState.created`), and no
        dead process left a sweep note in its collection."""
        self.meta.created()
        self.dead_notes, self.dead_notes_final = frozenset(), True

    def probe_looked_for(self, present: bool) -> None:
        """The once-per-process look for PROBE_FILE_ID's probe (which every sweep note carries
        beside it), made once the previous process's calls can no longer land, found it (then it
        is swept) or not (then no dead process's sweep note is there)."""
        self.probe_look_at = None
        if present:
            self.sweep_later(time.monotonic())
        else:
            self.dead_notes, self.dead_notes_final = frozenset(), True

    def sweep_later(self, at: float) -> None:
        """Vectors under PROBE_FILE_ID (a probe, sweep notes) are, or may be, in the KB's collection,
        which exists, until `sweep_probes` (due from `at`, or later if a probe of this process may
        land until then). Should this process die first, a restart must look for them, and none
        does on a KB whose stored meta says "never had a vector" (no file completed there: seeds
        1992, 4416, 4702, 9647). So the KB's mark becomes "has had vectors", the meta to be written
        (`left_for_sweep`)."""
        self.schedule_sweep(at)
        self.left_for_sweep()

    def schedule_sweep(self, at: float) -> None:
        """`sweep_probes` from `at` (or later), where a restart looks for PROBE_FILE_ID's vectors
        anyway, or they are withdrawn first (`withdraw_note_unless_looked_for`)."""
        self.probe_sweep_at = max(self.probe_sweep_at or 0.0, at)

    def left_for_sweep(self) -> None:
        """`sweep_later`'s mark: "has had vectors", the meta to be written (`flush` retries it),
        whatever the stored meta says. Only once the collection surely exists: a restart that
        reads the mark touches the collection (a missing one: Milvus creates it with dimension
        1536)."""
        self.meta.vectors_found()

    async def delete_file(self, store: KbStore, file_id: str,
                          delete_vectors: Callable[[], Awaitable[object]] | None = None,
                          record_sent: bool = False, failed: bool = False,
                          only: FileState | None = None) -> FileDeletion:
        """Forget a file whose vectors were deleted (or, first, delete them with `delete_vectors`).
        Returns whether the deletion is durable (`FileDeletion.durable`): no record of the file is
        left in plugin storage, or its journal entry, rewritten "0 chunks", makes a restart's
        `reconcile` remove it (a stored record would bring the file back after a restart; a stale
        index snapshot alone cannot, the load drops files without one). Storage itself is asked,
        never a listing that may predate the record. A file with a record save whose outcome is
        unknown (`record_sent`, or an UNSAVED one: LangBot may finish the save later) keeps that
        entry for the next process (TOMBSTONED). Waits for the KB lock no longer than the hook's
        deadline (BudgetSpent, nothing done: the vectors go under the lock too).

        With `delete_vectors`, the vectors go only once a restart could not bring the file back by
        its record: after its journal entry "0 chunks" is written or, if storage refuses that, its
        record is deleted (if neither, or a dead process's entry whose dimension the removal needs
        could not be read: not durable, nothing done). Without that entry, not while an upsert of
        the file may still land (`vector_writes_quiet_at`; not durable, nothing done, and until
        when: `writes_land_until`): landing after the delete, it would leave vectors the next
        process finds as a complete file. If they may have gone but the call failed (its answer
        lost), the file is no answer any more (ABORTED: `reconcile` finishes the deletion) and the
        error is raised.

        Durable before: nothing (the vectors are gone), or the entry / no record (`delete_vectors`).
        After: the record is gone, or the journal entry names the file; the index snapshot follows
        as soon as storage takes it (`flush`). With `only`, a file no longer in that state once
        the lock is held (uploaded again meanwhile) is left as it is (not durable)."""
        async with holding(self.lock):
            if only is not None and self.files.state(file_id) is not only:
                return NOT_DELETED
            marked = gone = False
            dim: int | None = None
            if delete_vectors is not None and self.files.state(file_id) is not FileState.ABORTED:
                # (an ABORTED file has its entry "0 chunks", or none; a dead process's entry of a
                # JOURNALLED file may count chunks: a restart would adopt what the delete leaves)
                try:
                    dim = await self._dim_of_writes(store, file_id)
                except StorageReadFailed:
                    return NOT_DELETED  # nothing done: deleted again later
                marked = await store.write_journal(JournalEntry(file_id, 0, dim))
                if not marked:
                    landing_until = self.vector_writes_quiet_at(file_id)
                    if time.monotonic() < landing_until:
                        # nothing deleted: with no entry, nothing would remove what lands then
                        return FileDeletion(durable=False, writes_land_until=landing_until)
                    gone = await store.delete_record(file_id)
                    if not gone:
                        return NOT_DELETED
            elif delete_vectors is not None:
                # An ABORTED file may have no entry (storage refused it then): one now names the
                # removal for a restart, should its probe land after its delete (`remove_first_write`)
                dim = self.files.first_write_dim(file_id) or self.files.late_write_dim(file_id)
                marked = await store.write_journal(JournalEntry(file_id, 0, dim))
            if delete_vectors is not None:
                try:
                    await delete_vectors()
                except BaseException:
                    facts = self.files.facts(file_id)  # (its first write's dimension stays known)
                    self.files.move(file_id, FileState.ABORTED,  # `reconcile` deletes what is left
                                    facts=replace(facts, record=None, failed=failed or facts.failed,
                                                  first_write_dim=facts.first_write_dim or (
                                                      dim if self.never_had_vectors else None)))
                    raise
            # (a dead process's upload too: a write of it may still land, as `reconcile` knows)
            late_vectors = self.calls_may_land(file_id)
            may_land = (record_sent or late_vectors
                        or self.files.state(file_id) in (FileState.UNSAVED, FileState.TOMBSTONED))
            self.files.move(file_id, FileState.DELETING, failed=failed)
            self.files.vectors_deleted(file_id)
            await self._unindex(store, file_id)
            self.records.drop(file_id)
            self.repair.forget_file(file_id)
            await self._persist_index(store)
            gone = gone or await store.delete_record(file_id)
            if gone and not may_land:
                self.files.move(file_id, FileState.FAILED if failed else FileState.DELETED)
                self.files.record_deleted(file_id)
                await self._clear_journal(store, file_id)
                return DELETED
            # A record is left, or LangBot may still write one or vectors: the entry keeps a
            # restart from indexing it and makes its `reconcile` remove them (for a record, best
            # effort where storage takes no write: there a late save cannot land either).
            marked = marked or await store.write_journal(JournalEntry(file_id, 0, self.files.late_write_dim(file_id)))
            if marked:
                self.files.journal_deleted(file_id)
            if may_land and (marked or (gone and not late_vectors)):
                self.files.move(file_id, FileState.TOMBSTONED, failed=failed)  # left to the next process
                if marked:
                    self.files.left_to_next_process(file_id)
            # else DELETING: `flush` deletes the record (then the entry, or writes it if vectors
            # may still land), or LangBot's retry does
            return DELETED if marked or gone else NOT_DELETED

    async def _dim_of_writes(self, store: KbStore, file_id: str) -> int | None:
        """The dimension of the file's vectors a write with an unknown outcome may have left (for
        `remove_first_write`), as far as known: noted here, or in a dead process's entry.
        StorageReadFailed where that entry could not be read and the collection may be missing:
        the entry rewritten "0 chunks" without it would lose the dimension the removal of that
        write needs, and the write would stay (seed 3138: a dead process's removal probe)."""
        for dim in (self.files.first_write_dim(file_id), self.files.late_write_dim(file_id)):
            if dim is not None:
                return dim
        if self.files.state(file_id) not in (FileState.JOURNALLED, None):  # (None: its entry may be unlisted)
            return None
        try:
            entry = await store.read_journal(file_id, strict=True)
        except StorageReadFailed:
            if self.fresh:
                raise
            return None
        return entry.dim if entry is not None else None

    async def delete_file_later(self, store: KbStore, file_id: str) -> bool:
        """Delete a file whose vectors may not be touched yet (`fresh`: the KB's collection may
        not exist, and a delete would make Milvus create it with the wrong dimension): its journal
        entry "0 chunks" makes `reconcile` delete its vectors and record once the collection may be
        touched, in this process (ABORTED, not failed: it ends DELETED) or after a restart
        (JOURNALLED). Returns whether the entry is durable; if not, nothing changed."""
        async with holding(self.lock):
            try:
                dim = await self._dim_of_writes(store, file_id)  # (a first write's, which its removal needs)
            except StorageReadFailed:
                return False
            if not await store.write_journal(JournalEntry(file_id, 0, dim)):
                return False
            self.files.journal_deleted(file_id)
            self.files.move(file_id, FileState.ABORTED)
            self.files.set_first_write_dim(file_id, dim)
            return True

    async def _clear_journal(self, store: KbStore, file_id: str) -> None:
        """Delete the file's journal entry (its state was moved by the caller)."""
        if await store.delete_journal(file_id):
            self.files.journal_deleted(file_id)
        else:
            self.files.journal_left(file_id)

    async def _index(self, records: list[FileRecord]) -> None:
        """Add (or replace) files: tokenised in a thread, indexed in a thread under the guard."""
        records = [r for r in records if r.chunks]
        if not records:
            return
        tokenized = await run_blocking(_tokenize_records, records)
        replaced = [r.file_id for r in records if r.file_id in self.index]
        old_tokens = await self._tokens_of(replaced)
        async with self.index_guard:
            await run_blocking(_replace_all, self.index, old_tokens, tokenized)

    async def _unindex(self, store: KbStore, file_id: str) -> None:
        if file_id not in self.index:
            return
        tokens = (await self._tokens_of([file_id], store)).get(file_id)
        async with self.index_guard:
            await run_blocking(self.index.remove_file, file_id, tokens)

    async def _tokens_of(self, file_ids: list[str], store: KbStore | None = None) -> dict[str, list[TokenizedChunk] | None]:
        """The tokenised chunks each file was indexed with (from its record), for an exact removal
        in O(chunks of the file); None where the record is gone (the index then finds them)."""
        out: dict[str, list[TokenizedChunk] | None] = {}
        for file_id in file_ids:
            record = self.files.unsaved_record(file_id) or self.records.get(file_id)
            if record is None and store is not None:
                record = await store.load_record(file_id)
            out[file_id] = None if record is None else await run_blocking(_tokenize_record, record)
        return out

    async def _persist_index(self, store: KbStore) -> bool:
        """Write what changed in the index since the last write (`IndexSnapshotWriter.write`).
        On a failure the rest waits for `flush`."""
        if not self.loaded:  # an index that never loaded its snapshot must not overwrite it
            self.snapshot.dirty = True
            return False
        try:
            # within the hook's deadline: a commit holds the guard up to its own, later one (seed 5139)
            async with holding(self.snapshot.guard):
                if not await self._name_unsaved_files(store):
                    self.snapshot.dirty = True
                    return False
                async with self.index_guard:
                    changes = await run_blocking(self.index.take_changes)
                written = await self.snapshot.write(store, changes)
                self._doubt_emptiness(written)
                return written
        except BudgetSpent:  # (only the guard's wait raises it: the store's calls answer False)
            self.snapshot.dirty = True
            return False

    async def _name_unsaved_files(self, store: KbStore) -> bool:
        """Whether a record, the index or the meta may be saved now. While plugin storage holds
        nothing of the KB, files committed or ingesting without a journal entry are named by
        nothing but that emptiness (a restart lists the vector DB); once any of those is stored,
        a restart trusts storage instead. So the first one waits until each of them has a journal
        entry, which a restart adopts from the vectors (or removes, if incomplete)."""
        if not await self._emptiness_known(store):
            return False
        if not self._emptiness_may_name_files():
            return True
        for file_id, record in self.files.unsaved_records().items():
            if record is not None and not await store.write_journal(JournalEntry(file_id, len(record.chunks))):
                return False
        for file_id, chunks in self.files.unjournalled().items():
            if not await store.write_journal(JournalEntry(file_id, chunks, self.files.first_write_dim(file_id))):
                return False
            self.files.set_unjournalled(file_id, None)
        # Files an earlier process committed under that emptiness are named by nothing else: not
        # before each is found in the vector DB and its record known here (UNSAVED, journalled above).
        await self._find_files(store.host)
        return not (self.repair.finding_files or self.to_index)

    async def _find_files(self, host: HostApi) -> None:
        """Find the files the vector DB holds while storage names none (`RepairState`), now, as
        far as this hook's time allows, once the collection may be listed. Those this process did
        not know are TO_INDEX (`continue_indexing` reads them)."""
        if self.fresh or not self.loaded:
            return
        if self.repair.mode is RepairMode.TO_LOOK:
            self.repair.start_looking()
        discovery = self.repair.discovery
        try:
            with budget(FIND_FILES_SLICE_S):  # the rest in later hooks (a save waits until then)
                while discovery is not None and not discovery.done and remaining() > 0:
                    found = await with_retries(lambda: discovery.step(host, self.kb_id))  # collection id = KB id
                    for file_id in sorted(f for f in found if f not in self.index):
                        self.files.to_index(file_id)
        except Exception as error:  # noqa: BLE001 - a later hook looks again
            logger.warning("kb=%s: its files could not be looked for in the vector DB now (%s)",
                           self.kb_id, describe(error))
            return
        if discovery is not None and discovery.done:
            self.repair.discovered(discovery)

    async def _emptiness_known(self, store: KbStore) -> bool:
        """Whether this process knows if plugin storage holds the meta, a record or an index
        segment of the KB (any of them ends the storage-empty mode). Not while the meta could not
        be read and no listing answered: then storage may hold nothing and files be named by that
        emptiness alone, which a save would end before they are found (seed 7450). So the KB's
        keys are listed first; if that fails, nothing is saved now."""
        if self.meta.presence is not Presence.UNKNOWN or self.snapshot.live or self.files.records_listed:
            return True
        snapshot = await list_keys(store.host)
        if snapshot is None:
            return False
        self.seed(snapshot)
        return True

    def _emptiness_may_name_files(self) -> bool:
        """As far as this process knows, plugin storage holds no meta (written at KB creation), no
        record and no index segment of this KB: a host whose storage writes all fail, or storage
        lost. A restart then lists the vector DB to find the files (`_reconcile_snapshot`);
        otherwise it trusts storage. (A manifest alone names no file: segments held in memory only
        are not in it.) Files may be named by that emptiness alone: each is journalled before
        anything ends it (`_name_unsaved_files`)."""
        return self.files.no_stored_record() and not self.snapshot.live and self.meta.presence is Presence.ABSENT

    def _storage_is_empty(self) -> bool:
        """`_emptiness_may_name_files`, and surely so: no write that would end that emptiness may
        have landed unseen (a failed save, or one given up on that LangBot may still do). Only
        then may a new file be named by the emptiness alone."""
        return (self._emptiness_may_name_files() and not self.emptiness_doubted
                and not storage_writes_may_land(self.kb_id))

    def _doubt_emptiness(self, saved: bool) -> None:
        """A save that would end the storage-empty mode failed: it may have landed."""
        if not saved and self._emptiness_may_name_files():
            self.emptiness_doubted = True

    async def _empty_confirmed(self, store: KbStore) -> bool:
        """`_storage_is_empty`, after a listing where a failed save left it in doubt: one that
        shows no record, index segment or meta of the KB clears the doubt; one that shows some
        tells this process what storage holds."""
        if not (self._emptiness_may_name_files() and self.emptiness_doubted):
            return self._storage_is_empty()
        snapshot = await list_keys(store.host)
        if snapshot is None:
            return False
        records, segments = snapshot.record_ids(self.kb_id), snapshot.index_segments(self.kb_id)
        if snapshot.has_meta(self.kb_id):
            self.meta.found_stored()
        if records:
            self.files.listed(records)
        if not (records or segments or snapshot.has_meta(self.kb_id)):
            self.emptiness_doubted = False
        return self._storage_is_empty() and not segments

    async def _save_record(self, store: KbStore, record: FileRecord) -> bool:
        """Save a record, once the files storage's emptiness alone names are journalled."""
        return await self._name_unsaved_files(store) and await self._put_record(store, record)

    async def _put_record(self, store: KbStore, record: FileRecord) -> bool:
        """Save a record; a failed save may have landed, or land later (`FileTable.save_failed`)."""
        saved = await store.save_record(record)
        if not saved:
            self.files.save_failed(record.file_id)
            self._doubt_emptiness(False)
        return saved

    async def _save_meta(self, store: KbStore) -> None:
        if not await self._name_unsaved_files(store):
            self.meta.saved(False)
            return
        if self.meta.metric_may_be_stored:  # the load could not read it: keep what it holds
            await self._reread_meta(store)
        saved = await store.save_meta(self.meta.to_save())
        self._doubt_emptiness(saved)
        self.meta.saved(saved)

    async def _reread_meta(self, store: KbStore) -> None:
        """The meta could not be read at load: read it again (nothing changes if that fails)."""
        meta = await store.load_meta()
        if meta is not None:
            self.meta.read(meta)

    def _being_written(self, part: str) -> bool:
        """Whether this process may be writing the value the part belongs to right now."""
        kind, ident = part_owner(part, self.kb_id)
        if kind == "kw/seg":
            return self.snapshot.being_written(ident)
        return kind == "file" and self.files.state(ident) in _RECORD_MAY_BE_WRITTEN


def decode_records(kb_id: str, blobs: list[tuple[str, bytes | None]]) -> list[FileRecord]:
    return [r for r in (decode_record(kb_id, f, b) for f, b in blobs) if r is not None]


def _tokenize_record(record: FileRecord) -> list[TokenizedChunk]:
    return tokenize_chunks([(c.chunk_id, c.text, c.heading) for c in record.chunks])


def _tokenize_records(records: list[FileRecord]) -> list[tuple[str, list[TokenizedChunk]]]:
    return [(r.file_id, _tokenize_record(r)) for r in records]


def _replace_all(index: SegmentIndex, old: dict[str, list[TokenizedChunk] | None],
                 tokenized: list[tuple[str, list[TokenizedChunk]]]) -> None:
    for file_id, chunks in old.items():
        index.remove_file(file_id, chunks)
    for file_id, chunks in tokenized:
        if file_id in index:
            index.remove_file(file_id, None)
        index.add_file(file_id, chunks)
