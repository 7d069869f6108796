"""Loading a KB's state after a restart, and indexing what the snapshot lacks.

The index snapshot is loaded (storage values and no tokenising; for a query it is read beside the
hooks while they answer from the vectors, state/snapshotload.py); files with a stored record that
the snapshot lacks are indexed, and indexed files without a record are UNRECORDED. With no
snapshot and no records at all, the file ids are discovered in the vector DB (repairstate.py) and
each file's record is rebuilt from its vectors. That work runs in bounded slices at the start of
later hooks (`continue_indexing`); meanwhile hybrid search uses its vector half only. The phases of
the load are loadstate.LoadState's; what the meta says is metastate.MetaState's.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time

from lucidrag.base.alongside import beside
from lucidrag.base.blocking import run_blocking
from lucidrag.base.budget import BudgetSpent, holding, remaining
from lucidrag.base.host import HostApi, describe, with_retries
from lucidrag.index.segindex import SegmentIndex
from lucidrag.state.filereads import FileReads
from lucidrag.state.lifecycle import FileState
from lucidrag.state.metastate import Mark
from lucidrag.state.repairstate import RepairMode
from lucidrag.state.snapshotload import SnapshotLoad, SnapshotUnusable
from lucidrag.state.store import KbStore, KeySnapshot, list_keys

logger = logging.getLogger(__name__)

INDEX_BATCH = 16  # files read and indexed per step of `continue_indexing`
FIRST_LOAD_BUDGET_S = 3.0  # indexing the first query of a process waits for, at most


class KbLoad(FileReads):
    """The load after a restart, the storage listing, and indexing in slices."""

    async def is_stored(self, store: KbStore, file_id: str) -> bool:
        """Whether this file id may already have vectors (a re-ingest). Lists storage keys at most
        once per process for this KB, so bulk uploads cost one listing, not one per file. While
        storage names none of the KB's files and they are still to be found in the vector DB, any
        may be there (`files_unseen`: the vector DB is asked, `ingest._replaces_earlier_version`)."""
        if self.files.may_have_vectors(file_id) or self.files_unseen():
            return True
        if not self.files.records_listed:
            snapshot = await list_keys(store.host)
            if snapshot is None:
                # Unknown: deleting first is safe only where the collection surely exists (on a
                # KB without vectors, Milvus would create it with dimension 1536). LangBot gives
                # every upload a new id, so a skipped delete costs nothing in practice.
                return self.meta.mark is Mark.SOME and not self.fresh
            self.seed(snapshot)
        return self.files.record_stored(file_id) or self.files.may_have_vectors(file_id) or self.files_unseen()

    async def ensure_loaded(self, host: HostApi, collection_id: str, index_now: bool = True,
                            wait_s: float = math.inf) -> None:
        """Load the KB's state once per process: the meta, the storage listing and the index
        snapshot (every mutation needs it first). A snapshot that has to be read from storage is
        waited for at most `wait_s` (a query); if it is not there by then it is read on beside
        this and later hooks (`loading`) and this returns. With `index_now`, index what a loaded
        snapshot lacks for up to FIRST_LOAD_BUDGET_S, or `wait_s` if shorter (a query that does not
        wait for the snapshot does not wait for that either, nor behind another hook doing it)."""
        if not self.loaded:
            if not self.load.opened:
                async with holding(self.lock):
                    if not self.load.opened:
                        await self._open(host)
            # A KB that may never have had a vector is only known to be `fresh` (nothing may touch
            # its vectors) once loaded: it is loaded at once.
            if wait_s == math.inf or not self.load.reading or self.meta.mark is Mark.NONE_YET or self.meta.unreadable:
                async with holding(self.lock):
                    if not self.loaded:
                        await self._finish_load(host)
            else:
                reading = self.load_beside(host)
                if reading is not None and wait_s > 0:
                    await asyncio.wait([reading], timeout=wait_s)
                if not self.loaded:
                    return
        if self.meta.unreadable and self.meta.mark is Mark.UNKNOWN:
            await self._reread_meta(KbStore(host, self.kb_id))  # (one read per hook until it answers)
        if index_now and self.repair.mode is RepairMode.TO_LOOK and not self.fresh:
            # Not from an ingest: listing a collection that does not exist yet makes LangBot's
            # Milvus adapter create it with dimension 1536.
            self.repair.start_looking()
        index_s = min(FIRST_LOAD_BUDGET_S, wait_s)
        if (index_now and self.indexing and not self.fresh and index_s > 0
                and (wait_s == math.inf or not self.indexing_lock.locked())):
            try:
                await self.continue_indexing(host, collection_id, time.monotonic() + index_s)
            except Exception as error:  # noqa: BLE001 - later hooks continue; this one answers from vectors
                logger.warning("kb=%s: indexing could not continue now (%s)", self.kb_id, describe(error))

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
        if meta is not None:
            self.meta.read(meta)
        elif self.meta.mark is not Mark.SOME:
            # missing, or storage failed: only a listing tells (a mark we cannot read may say "empty")
            listing = await list_keys(host)
            self.meta.unreadable_at_open(listing.has_meta(self.kb_id) if listing is not None else None)
        if not self.files.records_listed:
            snapshot = listing if listing is not None else await list_keys(host)
            if snapshot is not None:
                self.seed(snapshot)
        manifest = await store.load_index_manifest()
        if remaining() <= 0:  # reads were cut short by the hook's deadline: open again next time
            raise BudgetSpent("the knowledge base could not be loaded in this request's time")
        snapshot: SnapshotLoad | None = None
        if manifest is not None:
            try:
                snapshot = SnapshotLoad(self.kb_id, manifest)
            except ValueError as error:
                logger.warning("kb=%s: the keyword index snapshot is unusable (%s); indexing from the records",
                               self.kb_id, error)
        self.load.opened_with(snapshot)

    async def _finish_load(self, host: HostApi) -> None:
        """Read the rest of the snapshot (with the other hooks reading it), then reconcile it
        with the stored records. BudgetSpent if this hook's time ends first."""
        load = self.load.snapshot
        snapshot_index: SegmentIndex | None = None
        if load is not None:
            try:
                snapshot_index = await load.run(host)
            except SnapshotUnusable as error:
                logger.warning("kb=%s: the keyword index snapshot is unusable (%s); indexing from the records",
                               self.kb_id, error)
        if self.loaded:
            return
        # Shielded: a hook that ends meanwhile (no host call is left in it) must not leave the
        # index half adopted.
        await asyncio.shield(self.load.adopt(lambda: self._adopt_snapshot(load, snapshot_index)))

    async def _adopt_snapshot(self, load: SnapshotLoad | None, snapshot_index: SegmentIndex | None) -> None:
        try:
            await self._reconcile_snapshot(snapshot_index)
        except BaseException:
            self.load.adoption_failed()  # the next hook tries again
            raise
        if snapshot_index is not None and load is not None:
            self.snapshot.manifest_read(load.names)
        self.load.adopted()

    async def _reconcile_snapshot(self, snapshot_index: SegmentIndex | None) -> None:
        unindexed: list[str] = []
        async with self.index_guard:
            if snapshot_index is not None and not self.index.file_ids():
                self.index = snapshot_index
            indexed = self.index.file_ids()
            if self.files.records_listed:
                gone = sorted(f for f in indexed if not self.files.record_stored(f)
                              and self.files.state(f) in (None, FileState.COMMITTED))
                for file_id in gone:
                    self.files.move(file_id, FileState.UNRECORDED)
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
                unindexed = sorted(self.files.with_stored_record() - indexed - self.in_flight)  # (JOURNALLED ones too)
                for file_id in unindexed:
                    self.files.to_index(file_id)
            for file_id in indexed:  # what the snapshot names is committed, unless its state says otherwise
                if self.files.state(file_id) is None:
                    self.files.committed(file_id)
        if not len(self.index) and not unindexed:
            empty = self._emptiness_may_name_files()
            if self.meta.mark is Mark.NONE_YET or (self.meta.mark is Mark.UNKNOWN
                                                   and (self.meta.unreadable or empty)):
                self.meta.may_be_missing()  # (`_reread_meta`, `open_collection`)
            if empty and self.meta.mark is not Mark.NONE_YET:
                # storage has nothing: look in the vector DB (`ensure_loaded`, once it may be touched)
                self.repair.storage_knows_nothing()
        logger.info("kb=%s: keyword index snapshot %s: %d files / %d chunks; %d files to index%s", self.kb_id,
                    "loaded" if snapshot_index is not None else "absent", len(self.index.file_ids()),
                    len(self.index), len(self.to_index), ", files to find in the vector DB" if self.repair.finding_files else "")

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
            discovery = self.repair.discovery
            if not self.to_index and discovery is not None:
                found = await with_retries(lambda: discovery.step(host, collection_id))
                for file_id in sorted(f for f in found if f not in self.index):
                    self.files.to_index(file_id)
                if discovery.done:
                    self.repair.discovered(discovery)
                continue
            batch = list(itertools.islice(self.to_index, INDEX_BATCH))
            unread: set[str] = set()
            records = await self.file_records(host, collection_id, batch, unread)
            async with holding(self.lock):  # records were read outside it: skip what changed meanwhile
                await self._index([r for r in records.values() if r.file_id not in self.index
                                   and self.files.may_index(r.file_id)])
                for file_id in batch:  # TO_INDEX -> COMMITTED; forgotten if it has neither record nor vectors
                    if self.files.state(file_id) is not FileState.TO_INDEX:
                        continue  # changed meanwhile
                    if file_id in records and self._emptiness_may_name_files():
                        # named by storage's emptiness alone: its record is saved (journalled first)
                        # before anything ends that emptiness (`_name_unsaved_files`)
                        self.files.move(file_id, FileState.UNSAVED, records[file_id])
                    elif file_id in records:
                        self.files.committed(file_id)
                    elif remaining() > 0 and file_id not in unread:  # (unread: the next slice reads it)
                        self.files.forget(file_id)
            changed = True
            if unread and unread >= set(batch) - set(records):
                break  # the vector DB did not answer: a later hook carries on
        if not self.indexing:
            # A repair ends once every file it found is indexed: the files of the last discovery
            # step are read above still without trusting their (possibly stale) stored records.
            self.repair.indexed_everything()
        if changed or self.snapshot.dirty:
            await self._persist_index(KbStore(host, self.kb_id))
        if changed and not self.indexing:
            logger.info("kb=%s: keyword index complete: %d files / %d chunks", self.kb_id,
                        len(self.index.file_ids()), len(self.index))

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
                for file_id in [*self.to_index, *self.files.committed_files()]:
                    self.files.forget(file_id)  # found again by the discovery
                self.repair.rebuild()
                self.snapshot.drop_all(old.manifest)
            store = KbStore(host, self.kb_id)
            self.meta.first_vectors()
            await self._save_meta(store)
        await self.continue_indexing(host, collection_id, deadline)
        return not self.indexing
