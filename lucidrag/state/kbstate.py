"""The state of one knowledge base, and the only code that changes it.

One `KnowledgeBaseState` exists per (installation, KB). Each file is in one state of its
lifecycle (`lifecycle.FileTable`; docs/DESIGN.md draws the transitions). It also holds the KB's
keyword index (a `SegmentIndex`, persisted in plugin storage as immutable segments plus a small
manifest) and a bounded cache of `FileRecord`s (chunk order, headings, pages, parents, texts), which are read from
plugin storage per file when a result needs them and are never all held in memory. Everything is
derived from the host's vector DB (the source of truth). Every mutation is a method here: an
ingest's begin / first write / commit / abort, a file's deletion, the load after a restart,
reconciliation, indexing what the snapshot lacks, and retrying storage writes that failed.

Restart: the index snapshot is loaded (storage values and no tokenising; for a query it is read
beside the hooks while they answer from the vectors, state/snapshotload.py); files with a stored
record that the snapshot lacks are indexed, and indexed files without a record are dropped. With
no snapshot and no records at all, the file ids are discovered in the vector DB and each file's
record is rebuilt from its vectors. That work runs in bounded slices at the start of later hooks
(`continue_indexing`); meanwhile hybrid search uses its vector half only.

Crash safety: before an ingest writes its first vector it records a journal entry (file id, number
of chunks). Commit saves the FileRecord, indexes it, persists the index, and removes the entry. An
entry found after a restart belongs to an ingest that never committed: if every chunk's vector is
there, the ingest finished and only its bookkeeping was lost, so the file is adopted from its
vectors; otherwise its vectors are orphans and are deleted. Journal entries of ingests running in
this process are never touched. A deleted or failed file whose record may still be (or later be)
in storage keeps an entry "0 chunks", which makes a restart remove the record instead of
indexing it (`delete_file`).

CPU work (decoding, tokenising, index updates) runs in threads; the index is only read or changed
under `index_guard`, so a query never sees it half-updated and the event loop never stalls on it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lucidrag.base.alongside import beside
from lucidrag.base.blocking import run_blocking
from lucidrag.base.budget import BudgetSpent, holding, remaining
from lucidrag.base.host import HostApi, describe, with_retries
from lucidrag.base.writegate import WriteGate
from lucidrag.index.segindex import KeywordHit, SegmentIndex
from lucidrag.index.terms import TokenizedChunk, tokenize_chunks
from lucidrag.state.indexwriter import IndexSnapshotWriter
from lucidrag.state.latewrites import LateWrites
from lucidrag.state.lifecycle import FileState, FileTable, NotAnswers
from lucidrag.state.recordcache import RecordCache
from lucidrag.state.records import ChunkRecord, FileRecord, chunk_uuid, merge_rebuilt
from lucidrag.state.snapshotload import SnapshotLoad, SnapshotUnusable
from lucidrag.state.storage_keys import part_owner
from lucidrag.state.store import (
    JournalEntry,
    KbMeta,
    KbStore,
    KeySnapshot,
    StorageReadFailed,
    decode_record,
    list_keys,
    run_bounded,
)
from lucidrag.vectors.scoring import Metric
from lucidrag.vectors.vectorscan import LIST_WINDOW, FileDiscovery, file_vectors

logger = logging.getLogger(__name__)

LOAD_CONCURRENCY = 8  # storage reads in flight while loading records
INDEX_BATCH = 16  # files read and indexed per step of `continue_indexing`
FIRST_LOAD_BUDGET_S = 3.0  # indexing the first query of a process waits for, at most
ADOPTED_LIMIT = 10_000  # chunks learnt from vector hits without a record (storage lost)
COMMIT_SAVE_ATTEMPTS = 3  # a file's record is written this often before its ingest gives up
PROBE_FILE_ID = "lucidrag-probe"  # the file id of `open_collection`'s probe vector (no file has it)
# a file in one of these states may have its record written by this process at any moment
_RECORD_MAY_BE_WRITTEN = (FileState.INGESTING, FileState.JOURNALLED, FileState.ABORTED, FileState.UNSAVED,
                          FileState.TOMBSTONED)


@dataclass
class KnowledgeBaseState:
    kb_id: str
    index: SegmentIndex = field(default_factory=SegmentIndex)
    records: RecordCache = field(default_factory=RecordCache)
    metric: Metric | None = None
    loaded: bool = False
    # True while the KB's collection may not exist: plugin storage says the KB never had a vector
    # (meta written at KB creation), cannot say (the meta unreadable), or holds nothing of the KB,
    # and nothing else says otherwise. Then nothing may touch the vector DB but an upsert of the
    # model's vectors (an ingest's, or `open_collection`'s probe) -- LangBot's Milvus adapter
    # creates a missing collection with dimension 1536 on any search/list/delete, which then
    # refuses every vector of another dimension.
    fresh: bool = False
    has_vectors: bool | None = None  # what the stored meta says (None: unknown)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # mutations and the first load
    writes: WriteGate = field(default_factory=WriteGate)  # an ingest's writes; closed when the KB is deleted
    index_guard: asyncio.Lock = field(default_factory=asyncio.Lock)  # index changes and searches
    opened: bool = False  # meta, storage listing and index manifest read (`_open`)
    snapshot_load: SnapshotLoad | None = None  # the index snapshot, still being read (`loading`)
    adopting: asyncio.Future[None] | None = None  # the loaded snapshot, being taken in (once)
    first_write: asyncio.Lock = field(default_factory=asyncio.Lock)  # one creates the collection
    stored_ids: set[str] | None = None  # file ids with a record in plugin storage, once listed
    files: FileTable = field(default_factory=FileTable)  # every file not plainly COMMITTED, by state
    # ABORTED files whose vectors may be in the collection of a KB that never had a vector (file id
    # -> their dimension): `remove_first_write` removes them
    first_writes: dict[str, int] = field(default_factory=dict)
    # INGESTING files without a journal entry (file id -> chunks): begun while plugin storage held
    # nothing of the KB and failed the write, so a restart finds them in the vector DB; and ABORTED
    # ones whose "0 chunks" entry failed too (0)
    unjournalled: dict[str, int] = field(default_factory=dict)
    # files that are ingested but not in the index yet (restart without a current snapshot)
    to_index: dict[str, None] = field(default_factory=dict)  # (ordered; O(1) removal)
    discovery: FileDiscovery | None = None  # file ids still being looked for in the vector DB
    look_in_vector_db: bool = False  # storage knows no file: the vector DB is to be listed
    trust_records: bool = True  # False while a repair rebuilds every record from the vector DB
    adopted: dict[str, ChunkRecord] = field(default_factory=dict)  # vector hits without a record
    # files the index snapshot named without a stored record: deleted while the snapshot lagged
    # (their vectors went first) or whose record storage lost (their vectors are still answers).
    # Filled at the load only; a file leaves once its vectors are read (none) or its record saved
    unrecorded: set[str] = field(default_factory=set)
    undeleted_journals: set[str] = field(default_factory=set)  # journal keys `flush` still deletes
    late_writes: LateWrites = field(default_factory=LateWrites)  # files with a write that may still land
    meta_dirty: bool = False
    # the stored meta says (or may still say) "never had a vector": a restart would not look for
    # files in the vector DB, nor adopt journalled ones
    empty_mark_stored: bool = False
    meta_unknown: bool = False  # the stored meta exists (or may) but could not be read yet
    # whether plugin storage holds the KB's meta (None: unknown). Written at KB creation, so
    # False means a host whose storage writes fail, or storage lost: see `_storage_is_empty`
    meta_stored: bool | None = None
    snapshot: IndexSnapshotWriter = field(default_factory=IndexSnapshotWriter)  # the index in plugin storage
    stray_parts: set[str] = field(default_factory=set)  # part keys listed without their header
    indexing_lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one `continue_indexing` at a time

    # ================================================================ reads
    def known_files(self) -> set[str]:
        """Files that are ingested and committed (indexed, or waiting to be)."""
        return self.index.file_ids() | set(self.to_index)

    def has_files(self) -> bool:
        return len(self.index) > 0 or bool(self.to_index)

    @property
    def never_had_vectors(self) -> bool:
        """This KB never had a vector (the stored mark says so, or this process created it), and
        nothing here says otherwise (not merely unknown, as while the meta cannot be read or
        storage holds nothing of the KB: `fresh` covers that too)."""
        return self.fresh and self.has_vectors is False

    @property
    def indexing(self) -> bool:
        """The keyword index does not cover every file yet (see `continue_indexing`)."""
        return bool(self.to_index) or self.discovery is not None

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
    def journals(self) -> set[str]:
        """Files whose vectors `reconcile` settles: journalled by a dead process, or failed here."""
        return set(self.files.of(FileState.JOURNALLED)) | set(self.files.of(FileState.ABORTED))

    @property
    def unsaved(self) -> Mapping[str, FileRecord | None]:
        """Committed files whose record `flush` still has to write (file id -> record)."""
        return self.files.of(FileState.UNSAVED)

    async def keyword_search(self, query: str, top_k: int, file_ids: set[str] | None = None) -> list[KeywordHit]:
        async with self.index_guard:
            return await run_blocking(self.index.search, query, top_k, file_ids)

    async def file_records(self, host: HostApi, collection_id: str, file_ids: Iterable[str]) -> dict[str, FileRecord]:
        """The records of these files: cached, else from plugin storage, else rebuilt from the
        file's vectors (then saved back). Files with neither are left out."""
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
        stored = {r.file_id: r for r in await run_blocking(_decode_records, self.kb_id, list(zip(missing, blobs)))}
        if self.trust_records:
            for record in stored.values():
                self.records.put(record)
                out[record.file_id] = record
        lost = [f for f in missing if f not in out and f not in self.unsettled and self.may_know(f)]
        if lost and not self.fresh:
            for record in await run_bounded([lambda f=f: self._record_from_vectors(host, collection_id, f)
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
                if previous is None and record.file_id in (self.stored_ids or ()):
                    continue  # storage has its record and failed to read it: never overwrite it
                if self.lock.locked():
                    continue  # a change of the KB (a delete?) is under way: a later hit saves it
                async with self.lock:  # a delete landing during the save would be undone by it
                    if not self.files.is_answer(record.file_id):
                        continue
                    self.records.put(record)
                    if await self._save_record(store, record):
                        self._recorded(record.file_id)
                    else:
                        self.files.move(record.file_id, FileState.UNSAVED, record)
        return out

    def _recorded(self, file_id: str) -> None:
        """The file's record was just saved. A file the keyword index lacks (the snapshot named it
        without a record, so the load took it out: `unrecorded`; or only a segment held in memory
        named it before a restart) is indexed from it, so `unrecorded` only shrinks after the load."""
        if self.stored_ids is not None:
            self.stored_ids.add(file_id)
        self.unrecorded.discard(file_id)
        if self.loaded and file_id not in self.index and file_id not in self.in_flight:
            self.to_index[file_id] = None

    async def _record_from_vectors(self, host: HostApi, collection_id: str, file_id: str) -> FileRecord | None:
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
            return None
        if not items:
            self.unrecorded.discard(file_id)  # deleted while the index snapshot lagged
            return None
        if not any(str(item.get("id")) == first for item in items):
            if file_id not in self.files and file_id not in self.index and file_id not in self.unrecorded:
                self.files.move(file_id, FileState.ABORTED)
                logger.warning("kb=%s doc=%s: %d vectors of an unfinished ingest found; they are removed",
                               self.kb_id, file_id, len(items))
            return None
        record = await run_blocking(FileRecord.from_vector_items, file_id, items)
        return record if record.chunks else None

    async def is_stored(self, store: KbStore, file_id: str) -> bool:
        """Whether this file id may already have vectors (a re-ingest). Lists storage keys at most
        once per process for this KB, so bulk uploads cost one listing, not one per file."""
        if file_id in self.index or self._may_have_vectors(file_id) or file_id in self.to_index:
            return True
        if self.stored_ids is None:
            snapshot = await list_keys(store.host)
            if snapshot is None:
                # Unknown: deleting first is safe only where the collection surely exists (on a
                # KB without vectors, Milvus would create it with dimension 1536). LangBot gives
                # every upload a new id, so a skipped delete costs nothing in practice.
                return self.has_vectors is True and not self.fresh
            self.seed(snapshot)
        return file_id in (self.stored_ids or ()) or self._may_have_vectors(file_id)

    def has_committed(self, file_id: str) -> bool:
        """Whether this process knows the file as committed (indexed, to be indexed, or with a
        stored record) in a collection that exists: a version of it may be answered."""
        return not self.fresh and (file_id in self.index or file_id in self.to_index
                                   or file_id in (self.stored_ids or ()) or self.files.state(file_id) is FileState.UNSAVED)

    def _may_have_vectors(self, file_id: str) -> bool:
        """A file this process tracks whose vectors may exist (a DELETED file's are gone)."""
        return file_id in self.files and self.files.state(file_id) is not FileState.DELETED

    def seed(self, snapshot: KeySnapshot) -> None:
        """Learn which files have records and journal entries from a storage listing, unless this
        process already knows (every later change of this KB went through this object)."""
        if self.stored_ids is None:
            self.stored_ids = set(snapshot.record_ids(self.kb_id)) - set(self.files.of(FileState.DELETED))
            for file_id in snapshot.journal_ids(self.kb_id):
                if file_id not in self.files:  # this process knows better about its own files
                    self.files.move(file_id, FileState.JOURNALLED)
            # segments a manifest names (stored, or about to be) are not orphans, whenever the listing comes
            self.snapshot.listed(snapshot.index_segments(self.kb_id))
            self.stray_parts |= set(snapshot.stray_parts(self.kb_id))
            if self.meta_stored is None:
                self.meta_stored = snapshot.has_meta(self.kb_id)
            if self.loaded:  # the listing failed at load: index the records the snapshot lacks now
                indexed = self.index.file_ids()
                self.to_index.update(dict.fromkeys(sorted(self.stored_ids - indexed - self.in_flight)))

    # ================================================================ loading
    async def ensure_loaded(self, host: HostApi, collection_id: str, index_now: bool = True,
                            wait_s: float = math.inf) -> None:
        """Load the KB's state once per process: the meta, the storage listing and the index
        snapshot (every mutation needs it first). A snapshot that has to be read from storage is
        waited for at most `wait_s` (a query); if it is not there by then it is read on beside
        this and later hooks (`loading`) and this returns. With `index_now`, index what a loaded
        snapshot lacks for up to FIRST_LOAD_BUDGET_S, or `wait_s` if shorter (a query that does not
        wait for the snapshot does not wait for that either, nor behind another hook doing it)."""
        if not self.loaded:
            if not self.opened:
                async with holding(self.lock):
                    if not self.opened:
                        await self._open(host)
            # A KB that may never have had a vector is only known to be `fresh` (nothing may touch
            # its vectors) once loaded: it is loaded at once.
            if wait_s == math.inf or self.snapshot_load is None or self.has_vectors is False or self.meta_unknown:
                async with holding(self.lock):
                    if not self.loaded:
                        await self._finish_load(host)
            else:
                reading = self.load_beside(host)
                if reading is not None and wait_s > 0:
                    await asyncio.wait([reading], timeout=wait_s)
                if not self.loaded:
                    return
        if self.meta_unknown and self.has_vectors is None:
            await self._reread_meta(host)
        if index_now and self.look_in_vector_db and not self.fresh:
            # Not from an ingest: listing a collection that does not exist yet makes LangBot's
            # Milvus adapter create it with dimension 1536.
            self.look_in_vector_db = False
            self.discovery = FileDiscovery()
        index_s = min(FIRST_LOAD_BUDGET_S, wait_s)
        if (index_now and self.indexing and not self.fresh and index_s > 0
                and (wait_s == math.inf or not self.indexing_lock.locked())):
            try:
                await self.continue_indexing(host, collection_id, time.monotonic() + index_s)
            except Exception as error:  # noqa: BLE001 - later hooks continue; this one answers from vectors
                logger.warning("kb=%s: indexing could not continue now (%s)", self.kb_id, describe(error))

    @property
    def loading(self) -> bool:
        """The index snapshot is being read from storage (beside the hooks: `load_beside`)."""
        return self.opened and not self.loaded and self.snapshot_load is not None

    def load_beside(self, host: HostApi) -> asyncio.Task[None] | None:
        """Carry on reading the index snapshot while the current hook runs (base/alongside.py)."""
        return beside(f"load-index:{self.kb_id}", lambda: self._load_quietly(host)) if self.loading else None

    async def _load_quietly(self, host: HostApi) -> None:
        try:
            await self._finish_load(host)
        except BudgetSpent:
            pass  # the next hook reads on
        except Exception as error:  # noqa: BLE001 - the next hook (or a mutation) tries again
            logger.warning("kb=%s: loading the keyword index stopped (%s)", self.kb_id, describe(error))

    async def _open(self, host: HostApi) -> None:
        """What every hook needs before the index: the meta, the storage listing, the manifest."""
        store = KbStore(host, self.kb_id)
        meta = await store.load_meta()
        listing: KeySnapshot | None = None
        if meta is None and self.has_vectors is not True:
            # missing, or storage failed: only a listing tells (a mark we cannot read may say "empty")
            listing = await list_keys(host)
            self.meta_unknown = listing is None or listing.has_meta(self.kb_id)
            self.empty_mark_stored = self.meta_unknown
        if meta is not None:
            self.meta_stored = True
            self._apply_meta(meta)
        elif listing is not None:
            self.meta_stored = listing.has_meta(self.kb_id)
        if self.stored_ids is None:
            snapshot = listing if listing is not None else await list_keys(host)
            if snapshot is not None:
                self.seed(snapshot)
        manifest = await store.load_index_manifest()
        if remaining() <= 0:  # reads were cut short by the hook's deadline: open again next time
            raise BudgetSpent("the knowledge base could not be loaded in this request's time")
        if manifest is not None:
            try:
                self.snapshot_load = SnapshotLoad(self.kb_id, manifest)
            except ValueError as error:
                logger.warning("kb=%s: the keyword index snapshot is unusable (%s); indexing from the records",
                               self.kb_id, error)
        self.opened = True

    async def _finish_load(self, host: HostApi) -> None:
        """Read the rest of the snapshot (with the other hooks reading it), then reconcile it
        with the stored records. BudgetSpent if this hook's time ends first."""
        load = self.snapshot_load
        snapshot_index: SegmentIndex | None = None
        if load is not None:
            try:
                snapshot_index = await load.run(host)
            except SnapshotUnusable as error:
                logger.warning("kb=%s: the keyword index snapshot is unusable (%s); indexing from the records",
                               self.kb_id, error)
        if self.loaded:
            return
        if self.adopting is None:
            # Shielded: a hook that ends meanwhile (no host call is left in it) must not leave the
            # index half adopted.
            self.adopting = asyncio.ensure_future(self._adopt_snapshot(load, snapshot_index))
        await asyncio.shield(self.adopting)

    async def _adopt_snapshot(self, load: SnapshotLoad | None, snapshot_index: SegmentIndex | None) -> None:
        try:
            await self._reconcile_snapshot(snapshot_index)
        except BaseException:
            self.adopting = None  # the next hook tries again
            raise
        if snapshot_index is not None and load is not None:
            self.snapshot.manifest_read(load.names)
        self.snapshot_load = None
        self.loaded = True

    async def _reconcile_snapshot(self, snapshot_index: SegmentIndex | None) -> None:
        async with self.index_guard:
            if snapshot_index is not None and not self.index.file_ids():
                self.index = snapshot_index
            indexed = self.index.file_ids()
            if self.stored_ids is not None:
                gone = sorted(indexed - self.stored_ids - set(self.files))
                self.unrecorded.update(gone)
                if len(gone) > max(16, len(indexed) // 2):
                    # Not a few deletes the snapshot missed: it belongs to other records. Removing
                    # files one by one without their terms would cost more than indexing afresh.
                    logger.warning("kb=%s: the keyword index snapshot does not match the stored records; "
                                   "indexing from the records", self.kb_id)
                    self.snapshot.drop_all((await run_blocking(self.index.take_changes)).manifest)
                    self.index, indexed, gone = SegmentIndex(), set(), []
                for file_id in gone:  # deleted while the snapshot could not be updated
                    await run_blocking(self.index.remove_file, file_id, None)
                self.snapshot.dirty = self.snapshot.dirty or bool(gone)
                self.to_index = dict.fromkeys(sorted(self.stored_ids - indexed - self.in_flight))
        if not len(self.index) and not self.to_index:
            empty = self._storage_is_empty()
            if self.has_vectors is False or (self.has_vectors is None and (self.meta_unknown or empty)):
                self.fresh = True  # the collection may not exist (`_reread_meta`, `open_collection`)
            if empty and self.has_vectors is not False:
                # storage has nothing: look in the vector DB (`ensure_loaded`, once it may be touched)
                self.look_in_vector_db = True
        logger.info("kb=%s: keyword index snapshot %s: %d files / %d chunks; %d files to index%s", self.kb_id,
                    "loaded" if snapshot_index is not None else "absent", len(self.index.file_ids()),
                    len(self.index), len(self.to_index), ", files to find in the vector DB" if self.discovery else "")

    def _apply_meta(self, meta: KbMeta) -> None:
        self.empty_mark_stored = meta.has_vectors is False and self.has_vectors is not True
        self.metric = self.metric or meta.metric
        if self.has_vectors is None:  # what this process learnt is newer than storage
            self.has_vectors = meta.has_vectors

    async def _reread_meta(self, host: HostApi) -> None:
        """The meta could not be read at load: try again (one read per hook until it answers)."""
        meta = await KbStore(host, self.kb_id).load_meta()
        if meta is None:
            return
        self.meta_unknown = False
        self.meta_stored = True
        self._apply_meta(meta)
        if self.fresh and self.has_vectors is not False:
            self.fresh = False  # (and storage is not empty: nothing to look for in the vector DB)

    async def continue_indexing(self, host: HostApi, collection_id: str, deadline: float) -> None:
        """Index files the snapshot lacks (and find them in the vector DB if storage has nothing),
        a batch at a time until `deadline`; then persist what changed."""
        async with self.indexing_lock:
            await self._continue_indexing(host, collection_id, deadline)

    async def _continue_indexing(self, host: HostApi, collection_id: str, deadline: float) -> None:
        changed = False
        # (the hook's own budget too: once it is spent, storage reads return nothing at once and
        # the loop would spin without progress until `deadline`)
        while self.indexing and time.monotonic() < deadline and remaining() > 0:
            discovery = self.discovery
            if not self.to_index and discovery is not None:
                found = await with_retries(lambda: discovery.step(host, collection_id))
                self.to_index.update(dict.fromkeys(sorted(f for f in found if f not in self.index
                                                          and self.files.is_answer(f))))
                if discovery.done and self.discovery is discovery:
                    self.discovery = None
                continue
            batch = list(itertools.islice(self.to_index, INDEX_BATCH))
            records = await self.file_records(host, collection_id, batch)
            async with holding(self.lock):  # records were read outside it: skip what changed meanwhile
                await self._index([r for r in records.values() if r.file_id not in self.index
                                   and self.files.may_index(r.file_id)])
                for file_id in batch:
                    if file_id in records or remaining() > 0:  # unread for lack of time: next slice
                        self.to_index.pop(file_id, None)
            changed = True
        if not self.indexing:
            # A repair ends once every file it found is indexed: the files of the last discovery
            # step are read above still without trusting their (possibly stale) stored records.
            self.trust_records = True
        if changed or self.snapshot.dirty:
            await self._persist_index(KbStore(host, self.kb_id))
        if changed and not self.indexing:
            logger.info("kb=%s: keyword index complete: %d files / %d chunks", self.kb_id,
                        len(self.index.file_ids()), len(self.index))

    # ================================================================ ingest
    async def begin_ingest(self, store: KbStore, file_id: str, chunks: int, dim: int | None = None) -> bool:
        """Called before the first vector of `file_id` is written. Returns whether a restart would
        know the vectors: the journal entry is durable, or plugin storage holds nothing of the KB
        (a restart lists the vector DB: how LucidRAG works on a host whose storage writes all
        fail). If not, the file is left as it was and no vector may be written: a vector nothing
        durable names could outlive a failed rollback and a restart, and then nothing would
        remove it (or the rebuild repair would adopt a FAILED file)."""
        previous, record = self.files.state(file_id), self.files.unsaved_record(file_id)
        self.files.move(file_id, FileState.INGESTING)
        for _ in range(COMMIT_SAVE_ATTEMPTS):
            if await store.write_journal(JournalEntry(file_id, chunks, dim)):
                return True
        if self._storage_is_empty():
            self.unjournalled[file_id] = chunks
            return True
        if self.files.state(file_id) is FileState.INGESTING:
            self.files.move(file_id, previous, record)
        return False

    async def first_vectors_written(self, store: KbStore) -> None:
        """The KB now has vectors: clear the "never had a vector" mark at once, so that a restart
        does not take the KB for empty."""
        self.fresh = False
        if self.has_vectors is not True:
            self.has_vectors = True
            await self._save_meta(store)

    async def set_metric(self, store: KbStore, metric: Metric) -> None:
        self.metric = metric
        self.has_vectors = True
        await self._save_meta(store)

    async def commit_ingest(self, store: KbStore, record: FileRecord) -> bool:
        """The file's vectors are all written: make it known, durably. Returns False, changing
        nothing, when nothing in plugin storage would name the file after a restart (then the
        ingest must not report COMPLETED: the caller rolls it back).

        Durable before: the journal entry (`begin_ingest`). Durable after: the record (or, if that
        write failed, the journal entry, which a restart adopts from the vectors), and the KB's
        "has vectors" mark."""
        file_id = record.file_id
        async with holding(self.lock):  # BudgetSpent, nothing changed, if it is not free in time
            saved = False
            for _ in range(COMMIT_SAVE_ATTEMPTS if await self._name_unsaved_files(store) else 0):
                if await self._put_record(store, record):
                    saved = True
                    break
            if self.meta_dirty:
                await self._save_meta(store)
            if not saved and (self.empty_mark_stored
                              or (file_id in self.unjournalled and not self._storage_is_empty())):
                # a restart would take the KB for empty (it neither adopts the journal entry nor
                # looks), or trust storage, which names the file nowhere
                return False  # still INGESTING: the caller rolls back and calls `abort_ingest`
            self.unjournalled.pop(file_id, None)
            await self._index([record])
            self.records.put(record)
            if saved:
                if self.stored_ids is not None:
                    self.stored_ids.add(file_id)
                self.files.move(file_id, None)  # COMMITTED
            else:
                self.files.move(file_id, FileState.UNSAVED, record)  # `flush` writes the record
            self.to_index.pop(file_id, None)
            persisted = await self._persist_index(store)
            if saved and persisted:
                await self._clear_journal(store, file_id)
            # else the journal entry stays: a restart adopts the file (and indexes it)
        return True

    async def _name_unsaved_files(self, store: KbStore) -> bool:
        """Whether a record, the index or the meta may be saved now. While plugin storage holds
        nothing of the KB, files committed or ingesting without a journal entry are named by
        nothing but that emptiness (a restart lists the vector DB); once any of those is stored,
        a restart trusts storage instead. So the first one waits until each of them has a journal
        entry, which a restart adopts from the vectors (or removes, if incomplete)."""
        if not self._storage_is_empty():
            return True
        for file_id, record in list(self.files.of(FileState.UNSAVED).items()):
            if record is not None and not await store.write_journal(JournalEntry(file_id, len(record.chunks))):
                return False
        for file_id, chunks in list(self.unjournalled.items()):
            if not await store.write_journal(JournalEntry(file_id, chunks, self.first_writes.get(file_id))):
                return False
            self.unjournalled.pop(file_id, None)
        return True

    def _storage_is_empty(self) -> bool:
        """Plugin storage holds no meta (written at KB creation), no record and no index segment
        of this KB: a host whose storage writes all fail, or storage lost. A restart then lists
        the vector DB to find the files (`_reconcile_snapshot`); otherwise it trusts storage. (A
        manifest alone names no file: segments held in memory only are not in it.)"""
        return (self.stored_ids is not None and not self.stored_ids and not self.snapshot.live
                and self.meta_stored is False)

    async def _save_record(self, store: KbStore, record: FileRecord) -> bool:
        """Save a record, once the files storage's emptiness alone names are journalled."""
        return await self._name_unsaved_files(store) and await self._put_record(store, record)

    async def _put_record(self, store: KbStore, record: FileRecord) -> bool:
        """Save a record; a failed save may still land (`late_writes`)."""
        saved = await store.save_record(record)
        if not saved:
            self.late_writes.unanswered(record.file_id)
        return saved

    async def _save_meta(self, store: KbStore) -> None:
        meta = KbMeta(self.metric, self.has_vectors)
        saved = await self._name_unsaved_files(store) and await store.save_meta(meta)
        self.meta_dirty = not saved
        if saved:
            self.meta_stored = True
            self.empty_mark_stored = self.has_vectors is False

    async def abort_ingest(self, store: KbStore, file_id: str, vectors_removed: bool, dim: int | None = None,
                           record_sent: bool = False) -> None:
        """The ingest failed: the file is never an answer again, and whatever of it is stored goes.
        If its vectors are gone, so goes any record of it, as by a delete: an older version's (the
        same document id uploaded again) or the one a failed commit sent (`record_sent`: its save
        may have landed with its answer lost, or land later). Otherwise the next reconciliation
        deletes the vectors and the record (`dim`: the vectors' dimension, for a KB that never had
        a vector); after a `record_sent`, only the next process does (TOMBSTONED)."""
        unjournalled = self.unjournalled.pop(file_id, None) is not None
        if vectors_removed:
            try:
                await self.delete_file(store, file_id, record_sent=record_sent)  # FAILED: never an answer
                return
            except BudgetSpent:
                pass  # the KB's lock was not free within the hook's time: `reconcile` does it
        self.files.move(file_id, FileState.ABORTED)  # `reconcile` removes its vectors (and record)
        if dim is not None:
            self.first_writes[file_id] = dim
        # A restart must not take a complete set of vectors for a commit whose bookkeeping was
        # lost: the entry now says "nothing confirmed written" (best effort).
        for _ in range(COMMIT_SAVE_ATTEMPTS):
            if await store.write_journal(JournalEntry(file_id, 0, dim)):
                self.undeleted_journals.discard(file_id)
                if record_sent:
                    self.files.move(file_id, FileState.TOMBSTONED)
                break
        else:
            if unjournalled:  # still named by storage's emptiness alone: journalled before a first save
                self.unjournalled[file_id] = 0

    async def first_write_of(self, store: KbStore, file_id: str) -> int | None:
        """On a KB that never had a vector: the dimension of a write of `file_id` whose outcome is
        unknown and not settled yet (ABORTED here, or journalled by a dead process), else None.
        StorageReadFailed if its journal entry could not be read."""
        if file_id in self.first_writes:
            return self.first_writes[file_id]
        if self.files.state(file_id) is not FileState.JOURNALLED:
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
            if self.files.state(file_id) not in (FileState.JOURNALLED, FileState.ABORTED):
                return  # settled meanwhile
            known = dim if dim is not None else await self.first_write_of(store, file_id)
            if known is not None:
                await self.remove_first_write(host, collection_id, file_id, known)
        return remove

    async def open_collection(self, host: HostApi, collection_id: str, dim: int) -> bool:
        """Whether the vector DB may be searched and listed for this KB now. While its collection
        may not exist (`fresh`) and is not known never to have had a vector, one vector of the
        model's dimension `dim` is upserted under PROBE_FILE_ID and deleted again: the collection
        exists from then on, with the right dimension (`remove_first_write`)."""
        if not self.fresh:
            return True
        if self.never_had_vectors:
            return False  # nothing to find
        store = KbStore(host, self.kb_id)
        # the probe is a one-vector ingest: named by a journal entry (or storage's emptiness) first
        if not await self.begin_ingest(store, PROBE_FILE_ID, 0, dim):
            return False
        try:
            await remove_first_write(host, collection_id, PROBE_FILE_ID, dim, self.first_write, self.late_writes)
        except Exception as error:  # noqa: BLE001 - the next query tries again
            logger.warning("kb=%s: whether its vector collection exists could not be learnt (%s)",
                           self.kb_id, describe(error))
            await self.abort_ingest(store, PROBE_FILE_ID, False, dim)  # `reconcile` removes what it left
            return False
        await self.abort_ingest(store, PROBE_FILE_ID, True)
        self.fresh = False
        return True

    async def remove_first_write(self, host: HostApi, collection_id: str, file_id: str, dim: int) -> None:
        """Delete every vector of `file_id` from a KB that never had a vector, after a write whose
        outcome is unknown (its answer was lost, or the process died): the collection exists only
        if LangBot got that far, and a delete from a missing one makes LangBot's Milvus adapter
        create it with dimension 1536. So first one vector of the file's own dimension is upserted
        for it (every adapter's upsert creates a missing collection with the vector's dimension,
        and writes into an existing one), then the file's vectors are deleted by file id, that
        one included. Raises if either call fails (nothing is then known to be removed)."""
        await remove_first_write(host, collection_id, file_id, dim, self.first_write, self.late_writes)
        self.first_writes.pop(file_id, None)

    # ================================================================ delete
    async def delete_file(self, store: KbStore, file_id: str,
                          delete_vectors: Callable[[], Awaitable[object]] | None = None,
                          record_sent: bool = False) -> bool:
        """Forget a file whose vectors were deleted (or, first, delete them with `delete_vectors`).
        Returns whether the deletion is durable: no record of the file is left in plugin storage,
        or its journal entry, rewritten "0 chunks", makes a restart's `reconcile` remove it (a
        stored record would bring the file back after a restart; a stale index snapshot alone
        cannot, the load drops files without one). Storage itself is asked, never a listing that
        may predate the record. A file with a record save whose outcome is unknown (`record_sent`,
        or an UNSAVED one: LangBot may finish the save later) keeps that entry for the next
        process (TOMBSTONED). Waits for the KB lock no longer than the hook's deadline
        (BudgetSpent, nothing done: the vectors go under the lock too).

        With `delete_vectors`, the vectors go only once a restart could not bring the file back
        by its record: after its journal entry "0 chunks" is written or, if storage refuses that,
        its record is deleted (if neither: False, nothing done). If they may have gone but the
        call failed (its answer lost), the file is no answer any more (ABORTED: `reconcile`
        finishes the deletion) and the error is raised.

        Durable before: nothing (the vectors are gone), or the entry / no record (`delete_vectors`).
        After: the record is gone, or the journal entry names the file; the index snapshot follows
        as soon as storage takes it (`flush`)."""
        async with holding(self.lock):
            marked = gone = False
            if delete_vectors is not None and self.files.state(file_id) is not FileState.JOURNALLED:
                # (a dead process's entry names a JOURNALLED file already)
                dim = self.first_writes.get(file_id, self.late_writes.dim(file_id))
                marked = await store.write_journal(JournalEntry(file_id, 0, dim))
                if not marked:
                    gone = await store.delete_record(file_id)
                    if not gone:
                        return False
            if delete_vectors is not None:
                try:
                    await delete_vectors()
                except BaseException:
                    self.files.move(file_id, FileState.ABORTED)  # `reconcile` deletes what is left
                    raise
            late_vectors = self.late_writes.may_land(file_id)
            may_land = (record_sent or late_vectors
                        or self.files.state(file_id) in (FileState.UNSAVED, FileState.TOMBSTONED))
            self.files.move(file_id, FileState.DELETING)
            self.unjournalled.pop(file_id, None)
            await self._unindex(store, file_id)
            self.records.drop(file_id)
            self.unrecorded.discard(file_id)
            self.adopted = {c: r for c, r in self.adopted.items() if r.file_id != file_id}
            self.to_index.pop(file_id, None)
            await self._persist_index(store)
            gone = gone or await store.delete_record(file_id)
            if gone and not may_land:
                self.files.move(file_id, FileState.DELETED)
                if self.stored_ids is not None:
                    self.stored_ids.discard(file_id)
                await self._clear_journal(store, file_id)
                return True
            # A record is left, or LangBot may still write one or vectors: the entry keeps a
            # restart from indexing it and makes its `reconcile` remove them (for a record, best
            # effort where storage takes no write: there a late save cannot land either).
            marked = marked or await store.write_journal(JournalEntry(file_id, 0, self.late_writes.dim(file_id)))
            if marked:
                self.undeleted_journals.discard(file_id)
            if may_land and (marked or (gone and not late_vectors)):
                self.files.move(file_id, FileState.TOMBSTONED)  # left to the next process
                if marked:
                    self.late_writes.left_to_next_process(file_id)
            # else DELETING: `flush` deletes the record (then the entry, or writes it if vectors
            # may still land), or LangBot's retry does
            return marked or gone

    async def delete_file_later(self, store: KbStore, file_id: str) -> bool:
        """Delete a file whose vectors may not be touched yet (`fresh`: the KB's collection may
        not exist, and a delete would make Milvus create it with the wrong dimension): its journal
        entry "0 chunks" makes `reconcile` delete its vectors and record once the collection may be
        touched, in this process (ABORTED) or after a restart (JOURNALLED). Returns whether the
        entry is durable; if not, nothing changed."""
        async with holding(self.lock):
            if not await store.write_journal(JournalEntry(file_id, 0)):
                return False
            self.undeleted_journals.discard(file_id)
            self.unjournalled.pop(file_id, None)
            self.files.move(file_id, FileState.ABORTED)
            return True

    # ================================================================ upkeep
    async def flush(self, store: KbStore, deadline: float) -> None:
        """Retry the storage writes that failed earlier."""
        if self.meta_dirty and time.monotonic() < deadline:
            await self._save_meta(store)
        for file_id, record in list(self.files.of(FileState.UNSAVED).items()):
            if time.monotonic() >= deadline or not await self._name_unsaved_files(store):
                return
            async with holding(self.lock):  # a delete landing during the save would be undone by it
                if self.files.state(file_id) is not FileState.UNSAVED:
                    continue  # deleted meanwhile
                if record is not None and await self._put_record(store, record):  # UNSAVED -> COMMITTED
                    self.files.move(file_id, None)
                    self._recorded(file_id)
                    if not self.snapshot.dirty:
                        await self._clear_journal(store, file_id)
        for file_id in list(self.files.of(FileState.DELETING)):
            if time.monotonic() >= deadline:
                return
            async with holding(self.lock):
                if self.files.state(file_id) is FileState.DELETING and await store.delete_record(file_id):
                    if self.stored_ids is not None:
                        self.stored_ids.discard(file_id)
                    if self.late_writes.may_land(file_id):  # the entry goes to the next process
                        if await store.write_journal(JournalEntry(file_id, 0, self.late_writes.dim(file_id))):
                            self.files.move(file_id, FileState.TOMBSTONED)  # DELETING -> TOMBSTONED
                            self.late_writes.left_to_next_process(file_id)
                        continue
                    self.files.move(file_id, FileState.DELETED)  # DELETING -> DELETED
                    await self._clear_journal(store, file_id)
        for file_id in list(self.undeleted_journals):
            if time.monotonic() >= deadline:
                return
            if await store.delete_journal(file_id):
                self.undeleted_journals.discard(file_id)
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

    def _being_written(self, part: str) -> bool:
        """Whether this process may be writing the value the part belongs to right now."""
        kind, ident = part_owner(part, self.kb_id)
        if kind == "kw/seg":
            return self.snapshot.being_written(ident)
        return kind == "file" and self.files.state(ident) in _RECORD_MAY_BE_WRITTEN

    def needs_upkeep(self) -> bool:
        return bool(self.meta_dirty or self.unsaved or self.files.of(FileState.DELETING) or self.undeleted_journals
                    or self.journals or self.snapshot.needs_upkeep()
                    or any(not self._being_written(p) for p in self.stray_parts)
                    or (self.loaded and self.indexing))

    async def upkeep(self, host: HostApi, collection_id: str, deadline: float, index: bool = True) -> None:
        """Continue this KB's unfinished work until `deadline`. With `index`, also index what the
        keyword index lacks, unless another hook is doing so (never wait behind it)."""
        store = KbStore(host, self.kb_id)
        await self.flush(store, deadline)
        if not self.loaded:
            # Settling journal entries changes the index: it waits for the snapshot (within this
            # upkeep's time; then it is read on beside the hooks).
            if not self.journals or time.monotonic() >= deadline:
                return
            await self.ensure_loaded(host, collection_id, index_now=False, wait_s=deadline - time.monotonic())
            if not self.loaded:
                return
        await self.reconcile(host, collection_id, deadline)
        if index and self.indexing and not self.indexing_lock.locked():
            await self.continue_indexing(host, collection_id, deadline)

    async def reconcile(self, host: HostApi, collection_id: str, deadline: float) -> None:
        """Settle journal entries of ingests that never committed (see the module docstring)."""
        store = KbStore(host, self.kb_id)
        for file_id in sorted(self.journals):
            if time.monotonic() >= deadline:
                return
            if self.fresh and not self.never_had_vectors and file_id not in self.first_writes:
                continue  # whether the collection exists is unknown yet: no call may create it
            if self.files.state(file_id) is FileState.ABORTED:  # its vectors go, whatever storage holds
                if self.fresh:
                    await self.delete_file(store, file_id, self.first_write_remover(  # ABORTED -> DELETED
                        host, store, collection_id, file_id, self.first_writes.get(file_id)))
                    self.first_writes.pop(file_id, None)
                    continue
                await with_retries(lambda f=file_id: host.vector_delete(collection_id, file_ids=[f]))
                self.first_writes.pop(file_id, None)
                await self.delete_file(store, file_id)  # ABORTED -> DELETED
                continue
            try:
                entry = await store.read_journal(file_id, strict=True)
            except StorageReadFailed:
                continue  # unknown yet: it stays JOURNALLED (no answer) for a later upkeep
            if entry is None:  # already settled: JOURNALLED -> as it is
                self.files.move(file_id, None)
                continue
            if self.has_vectors is False:
                # The stored mark says the KB never got its first vector (it is cleared right after
                # the first upsert; a file that COMPLETED while it could not be cleared has its
                # record, since a commit there needs one). A file with a record and an entry of its
                # chunks committed and only its entry was left: as it is. Any other is no answer
                # ("0 chunks": failed or deleted, whatever record it has included): whatever its
                # write (of a dead process, or a failed one) left goes, without letting Milvus
                # create a wrong collection; an entry older than `dim` has nothing to re-create it
                # with, and only its record goes.
                if self.stored_ids is None:
                    continue  # which files have a record is not known yet
                recorded = file_id in self.stored_ids
                if (recorded and entry.chunks > 0) or (entry.dim is None and not recorded):
                    self.files.move(file_id, None)
                    await self._clear_journal(store, file_id)
                    continue
                if entry.dim is None:
                    await self.delete_file(store, file_id)  # JOURNALLED -> DELETED
                    continue
                if entry.chunks and not await store.write_journal(JournalEntry(file_id, 0, entry.dim)):
                    continue  # a restart must never adopt the probe `remove_first_write` writes
                await self.delete_file(store, file_id, self.first_write_remover(  # JOURNALLED -> DELETED
                    host, store, collection_id, file_id, entry.dim))
                continue
            # past Milvus' listing window the journalled count's chunk ids are read by id
            ids = [chunk_uuid(file_id, i) for i in range(entry.chunks)] if entry.chunks > LIST_WINDOW else []
            items = await with_retries(lambda f=file_id: file_vectors(host, collection_id, f, ids))
            if entry.chunks > 0 and len(items) >= entry.chunks:
                record = await run_blocking(FileRecord.from_vector_items, file_id, items)
                async with holding(self.lock):  # JOURNALLED -> COMMITTED (or UNSAVED)
                    if self.files.state(file_id) is not FileState.JOURNALLED:
                        continue  # deleted (or settled) meanwhile
                    stored = await store.load_record(file_id)
                    record = stored if stored is not None and len(stored.chunks) == len(record.chunks) else record
                    await self._index([record])
                    self.to_index.pop(file_id, None)
                    saved = stored is record or await self._save_record(store, record)
                    self.files.move(file_id, None if saved else FileState.UNSAVED, record)
                    if saved and self.stored_ids is not None:
                        self.stored_ids.add(file_id)
                    if await self._persist_index(store) and saved:
                        await self._clear_journal(store, file_id)
                    elif saved:
                        self.undeleted_journals.add(file_id)  # the entry goes with the next flush
                    # else the entry is all that names the file: `flush` clears it with the record
                logger.info("kb=%s doc=%s: adopted an ingest that finished before a restart (%d chunks)",
                            self.kb_id, file_id, len(items))
            else:
                if items:
                    await with_retries(lambda f=file_id: host.vector_delete(collection_id, file_ids=[f]))
                await self.delete_file(store, file_id)
                if items or entry.chunks:
                    logger.warning("kb=%s doc=%s: removed %d vectors an interrupted ingest left behind",
                                   self.kb_id, file_id, len(items))

    async def rebuild_from_vector_db(self, host: HostApi, collection_id: str, deadline: float = math.inf) -> bool:
        """Repair: forget the keyword index and the "no vectors yet" mark and derive everything
        from the vector DB again, file by file (records are rebuilt from the vectors and saved).
        Runs until `deadline`; later hooks continue. Returns whether it finished. A KB whose
        stored meta says it never had a vector, and that knows no file, has nothing to rebuild:
        listing its collection would make Milvus create it with the wrong dimension."""
        await self.ensure_loaded(host, collection_id, index_now=False)
        if self.fresh and not self.has_files():
            return True
        async with self.lock:
            async with self.index_guard:
                old = await run_blocking(self.index.take_changes)
                self.index = SegmentIndex()
                self.records.clear()
                self.adopted.clear()
                self.to_index = {}
                self.discovery = FileDiscovery()
                self.trust_records = False
                self.snapshot.drop_all(old.manifest)
            store = KbStore(host, self.kb_id)
            self.fresh, self.has_vectors, self.loaded = False, True, True
            await self._save_meta(store)
        await self.continue_indexing(host, collection_id, deadline)
        return not self.indexing

    def may_know(self, file_id: str) -> bool:
        """Whether vectors of this file may be an answer: it is indexed, the index snapshot named it
        (its record was lost), or the index is not complete yet. Once it is, vectors of a file
        nothing names are what a failed ingest could not remove (storage and the vector DB failed
        at once): never answers. While the snapshot is still being read, a stored record names it."""
        return self.files.is_answer(file_id) and (
            self.indexing or file_id in self.index or self.files.state(file_id) is FileState.UNSAVED
            or file_id in self.unrecorded or (self.loading and file_id in (self.stored_ids or ())))

    def adopt_hit(self, result: dict[str, Any]) -> ChunkRecord | None:
        """A vector search returned a chunk we have no record of (storage lost): learn it from its
        metadata so it can be returned with text and citation."""
        meta = result.get("metadata") or {}
        file_id = meta.get("file_id")
        if not self.may_know(str(file_id or "")):
            return None
        chunk_id = str(result["id"])
        known = self.adopted.get(chunk_id)
        if known is not None:
            return known
        text = meta.get("text") or result.get("document")
        if not text or not file_id:
            return None
        index = meta.get("chunk_index")
        page = meta.get("page")
        if len(self.adopted) >= ADOPTED_LIMIT:
            self.adopted.clear()
        chunk = self.adopted[chunk_id] = ChunkRecord(
            chunk_id, str(file_id), int(index) if isinstance(index, (int, float)) else 0, str(text),
            str(meta.get("heading") or ""), int(page) if isinstance(page, (int, float)) and page else None,
            document_name=str(meta.get("document_name") or ""),
        )
        return chunk

    # ================================================================ internals
    async def _clear_journal(self, store: KbStore, file_id: str) -> None:
        """Delete the file's journal entry (its state was moved by the caller)."""
        if await store.delete_journal(file_id):
            self.undeleted_journals.discard(file_id)
        else:
            self.undeleted_journals.add(file_id)

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
        async with self.snapshot.guard:
            if not await self._name_unsaved_files(store):
                self.snapshot.dirty = True
                return False
            async with self.index_guard:
                changes = await run_blocking(self.index.take_changes)
            return await self.snapshot.write(store, changes)

async def remove_first_write(host: HostApi, collection_id: str, file_id: str, dim: int,
                             first_write: asyncio.Lock | None = None, late_writes: LateWrites | None = None) -> None:
    """`KnowledgeBaseState.remove_first_write` (also for a KB being deleted, which has no state)."""
    probe = [0.0] * dim
    probe[0] = 1.0
    chunk_id = chunk_uuid(file_id, -1)  # no chunk's id: never taken for chunk 0, the completion mark
    sender = late_writes or LateWrites()
    async with first_write or asyncio.Lock():  # concurrent creators race on Milvus Lite
        await with_retries(lambda: sender.send(file_id, dim, lambda: host.vector_upsert(
            collection_id=collection_id, vectors=[probe], ids=[chunk_id],
            metadata=[{"file_id": file_id, "uuid": chunk_id, "text": ""}], documents=[""])))
    await with_retries(lambda: host.vector_delete(collection_id, file_ids=[file_id]))


def _decode_records(kb_id: str, blobs: list[tuple[str, bytes | None]]) -> list[FileRecord]:
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
