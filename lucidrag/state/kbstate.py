"""The state of one knowledge base, and the only code that changes it.

One `KnowledgeBaseState` exists per (installation, KB). It holds the KB's keyword index (a
`SegmentIndex`, persisted in plugin storage as immutable segments plus a small manifest) and a
bounded cache of `FileRecord`s (chunk order, headings, pages, parents, texts), which are read from
plugin storage per file when a result needs them and are never all held in memory. Everything is
derived from the host's vector DB (the source of truth). Every mutation is a method here: an
ingest's begin / first write / commit / abort, a file's deletion, the load after a restart,
reconciliation, indexing what the snapshot lacks, and retrying storage writes that failed.

Restart: the index snapshot is loaded (a few storage values, no tokenising); files with a stored
record that the snapshot lacks are indexed, and indexed files without a record are dropped. With
no snapshot and no records at all, the file ids are discovered in the vector DB and each file's
record is rebuilt from its vectors. That work runs in bounded slices at the start of later hooks
(`continue_indexing`); meanwhile hybrid search uses its vector half only.

Crash safety: before an ingest writes its first vector it records a journal entry (file id, number
of chunks). Commit saves the FileRecord, indexes it, persists the index, and removes the entry. An
entry found after a restart belongs to an ingest that never committed: if every chunk's vector is
there, the ingest finished and only its bookkeeping was lost, so the file is adopted from its
vectors; otherwise its vectors are orphans and are deleted. Journal entries of ingests running in
this process are never touched.

CPU work (decoding, tokenising, index updates) runs in threads; the index is only read or changed
under `index_guard`, so a query never sees it half-updated and the event loop never stalls on it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from lucidrag.base.blocking import run_blocking
from lucidrag.base.host import HostApi, describe, with_retries
from lucidrag.index.segindex import KeywordHit, SegmentIndex
from lucidrag.index.terms import TokenizedChunk, tokenize_chunks
from lucidrag.state.recordcache import RecordCache
from lucidrag.state.records import ChunkRecord, FileRecord
from lucidrag.state.store import (
    JournalEntry,
    KbMeta,
    KbStore,
    KeySnapshot,
    decode_record,
    list_keys,
)
from lucidrag.vectors.scoring import Metric
from lucidrag.vectors.vectorscan import FileDiscovery, file_vectors

logger = logging.getLogger(__name__)

LOAD_CONCURRENCY = 8  # storage reads in flight while loading records or segments
INDEX_BATCH = 16  # files read and indexed per step of `continue_indexing`
FIRST_LOAD_BUDGET_S = 3.0  # indexing the first query of a process waits for, at most
ADOPTED_LIMIT = 10_000  # chunks learnt from vector hits without a record (storage lost)


@dataclass
class KnowledgeBaseState:
    kb_id: str
    index: SegmentIndex = field(default_factory=SegmentIndex)
    records: RecordCache = field(default_factory=RecordCache)
    metric: Metric | None = None
    loaded: bool = False
    # True when plugin storage says this KB never had a vector (meta written at KB creation) and
    # nothing else says otherwise: then nothing may touch the vector DB before the first upsert --
    # LangBot's Milvus adapter creates a missing collection with dimension 1536 on any
    # search/list/delete, which then refuses every vector of another dimension.
    fresh: bool = False
    has_vectors: bool | None = None  # what the stored meta says (None: unknown)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # mutations and the first load
    index_guard: asyncio.Lock = field(default_factory=asyncio.Lock)  # index changes and searches
    persist_guard: asyncio.Lock = field(default_factory=asyncio.Lock)  # index snapshot writes
    first_write: asyncio.Lock = field(default_factory=asyncio.Lock)  # one creates the collection
    stored_ids: set[str] | None = None  # file ids with a record in plugin storage, once listed
    in_flight: set[str] = field(default_factory=set)  # ingests of this process past begin_ingest
    journals: set[str] = field(default_factory=set)  # journal entries of earlier processes
    # files that are ingested but not in the index yet (restart without a current snapshot)
    to_index: dict[str, None] = field(default_factory=dict)  # (ordered; O(1) removal)
    discovery: FileDiscovery | None = None  # file ids still being looked for in the vector DB
    look_in_vector_db: bool = False  # storage knows no file: the vector DB is to be listed
    trust_records: bool = True  # False while a repair rebuilds every record from the vector DB
    adopted: dict[str, ChunkRecord] = field(default_factory=dict)  # vector hits without a record
    # storage writes that failed, retried by `flush`
    unsaved: dict[str, FileRecord] = field(default_factory=dict)
    undeleted_records: set[str] = field(default_factory=set)
    undeleted_journals: set[str] = field(default_factory=set)
    meta_dirty: bool = False
    index_dirty: bool = False
    pending_segments: dict[str, bytes] = field(default_factory=dict)  # written before the manifest
    pending_drops: set[str] = field(default_factory=set)  # deleted after it
    pending_manifest: bytes | None = None
    orphan_segments: set[str] = field(default_factory=set)  # left by a crash between writes
    manifest_known: bool = False  # the stored manifest was read or written by this process

    # ================================================================ reads
    def known_files(self) -> set[str]:
        """Files that are ingested and committed (indexed, or waiting to be)."""
        return self.index.file_ids() | set(self.to_index)

    def has_files(self) -> bool:
        return len(self.index) > 0 or bool(self.to_index)

    @property
    def indexing(self) -> bool:
        """The keyword index does not cover every file yet (see `continue_indexing`)."""
        return bool(self.to_index) or self.discovery is not None

    @property
    def unsettled(self) -> set[str]:
        """Files whose vectors may be incomplete: ingests running now or cut short by a crash."""
        return self.journals | self.in_flight

    async def keyword_search(self, query: str, top_k: int, file_ids: set[str] | None = None) -> list[KeywordHit]:
        async with self.index_guard:
            return await run_blocking(self.index.search, query, top_k, file_ids)

    async def file_records(self, host: HostApi, collection_id: str, file_ids: Iterable[str]) -> dict[str, FileRecord]:
        """The records of these files: cached, else from plugin storage, else rebuilt from the
        file's vectors (then saved back). Files with neither are left out."""
        out: dict[str, FileRecord] = {}
        missing: list[str] = []
        for file_id in dict.fromkeys(file_ids):
            record = self.unsaved.get(file_id) or self.records.get(file_id)
            if record is not None:
                out[file_id] = record
            else:
                missing.append(file_id)
        if not missing:
            return out
        store = KbStore(host, self.kb_id)
        if self.trust_records:
            blobs = await _gather_bounded([store.load_record_blob(f) for f in missing], LOAD_CONCURRENCY)
            for record in await run_blocking(_decode_records, self.kb_id, list(zip(missing, blobs))):
                self.records.put(record)
                out[record.file_id] = record
        lost = [f for f in missing if f not in out and f not in self.unsettled]
        if lost and not self.fresh:
            for record in await _gather_bounded([self._record_from_vectors(host, collection_id, f) for f in lost],
                                                LOAD_CONCURRENCY):
                if record is not None:
                    out[record.file_id] = record
                    if self.trust_records and record.file_id in (self.stored_ids or ()):
                        continue  # storage has its record and failed to read it: never overwrite it
                    self.records.put(record)
                    if await store.save_record(record):
                        if self.stored_ids is not None:
                            self.stored_ids.add(record.file_id)
                    else:
                        self.unsaved[record.file_id] = record
        return out

    async def _record_from_vectors(self, host: HostApi, collection_id: str, file_id: str) -> FileRecord | None:
        try:
            items = await with_retries(lambda: file_vectors(host, collection_id, file_id))
        except Exception as error:  # noqa: BLE001 - a result of this file is dropped, not the query
            logger.warning("kb=%s doc=%s: its record could not be read back from the vector DB (%s)",
                           self.kb_id, file_id, describe(error))
            return None
        if not items:
            return None
        record = await run_blocking(FileRecord.from_vector_items, file_id, items)
        return record if record.chunks else None

    async def is_stored(self, store: KbStore, file_id: str) -> bool:
        """Whether this file id may already have vectors (a re-ingest). Lists storage keys at most
        once per process for this KB, so bulk uploads cost one listing, not one per file."""
        if file_id in self.index or file_id in self.in_flight or file_id in self.journals or file_id in self.to_index:
            return True
        if self.stored_ids is None:
            snapshot = await list_keys(store.host)
            if snapshot is None:
                return True  # unknown: assume it may exist (deleting first is always safe here)
            self.seed(snapshot)
        return file_id in (self.stored_ids or ()) or file_id in self.journals

    def seed(self, snapshot: KeySnapshot) -> None:
        """Learn which files have records and journal entries from a storage listing, unless this
        process already knows (every later change of this KB went through this object)."""
        if self.stored_ids is None:
            self.stored_ids = set(snapshot.record_ids(self.kb_id))
            self.journals |= set(snapshot.journal_ids(self.kb_id)) - self.in_flight
            self.orphan_segments |= set(snapshot.index_segments(self.kb_id))

    # ================================================================ loading
    async def ensure_loaded(self, host: HostApi, collection_id: str, index_now: bool = True) -> None:
        """Load the index snapshot once per process (every mutation needs it first). With
        `index_now`, also index what it lacks for up to FIRST_LOAD_BUDGET_S."""
        if not self.loaded:
            async with self.lock:
                if not self.loaded:
                    await self._load(host)
                    self.loaded = True
        if index_now and self.look_in_vector_db and not self.fresh:
            # Not from an ingest: listing a collection that does not exist yet makes LangBot's
            # Milvus adapter create it with dimension 1536.
            self.look_in_vector_db = False
            self.discovery = FileDiscovery()
        if index_now and self.indexing and not self.fresh:
            await self.continue_indexing(host, collection_id, time.monotonic() + FIRST_LOAD_BUDGET_S)

    async def _load(self, host: HostApi) -> None:
        store = KbStore(host, self.kb_id)
        meta = await store.load_meta()
        if meta is not None:
            self.metric = self.metric or meta.metric
            if self.has_vectors is None:  # what this process learnt is newer than storage
                self.has_vectors = meta.has_vectors
        if self.stored_ids is None:
            snapshot = await list_keys(host)
            if snapshot is not None:
                self.seed(snapshot)
        snapshot_index = await self._load_index_snapshot(store)
        async with self.index_guard:
            if snapshot_index is not None and not self.index.file_ids():
                self.index = snapshot_index
            self.orphan_segments -= set(self.pending_segments)
            indexed = self.index.file_ids()
            if self.stored_ids is not None:
                gone = sorted(indexed - self.stored_ids - self.in_flight - self.journals)
                if len(gone) > max(16, len(indexed) // 2):
                    # Not a few deletes the snapshot missed: it belongs to other records. Removing
                    # files one by one without their terms would cost more than indexing afresh.
                    logger.warning("kb=%s: the keyword index snapshot does not match the stored records; "
                                   "indexing from the records", self.kb_id)
                    self.pending_drops |= set(SegmentIndex.manifest_segment_names(
                        (await run_blocking(self.index.take_changes)).manifest))
                    self.index, indexed, gone = SegmentIndex(), set(), []
                for file_id in gone:  # deleted while the snapshot could not be updated
                    await run_blocking(self.index.remove_file, file_id, None)
                self.index_dirty = self.index_dirty or bool(gone)
                self.to_index = dict.fromkeys(sorted(self.stored_ids - indexed - self.in_flight))
        if not len(self.index) and not self.to_index:
            if self.has_vectors is False:
                self.fresh = True
            elif self.stored_ids is not None:  # storage has nothing: look in the vector DB (`ensure_loaded`)
                self.look_in_vector_db = True
        logger.info("kb=%s: keyword index snapshot %s: %d files / %d chunks; %d files to index%s", self.kb_id,
                    "loaded" if snapshot_index is not None else "absent", len(self.index.file_ids()),
                    len(self.index), len(self.to_index), ", files to find in the vector DB" if self.discovery else "")

    async def _load_index_snapshot(self, store: KbStore) -> SegmentIndex | None:
        manifest = await store.load_index_manifest()
        if manifest is None:
            return None
        try:
            names = SegmentIndex.manifest_segment_names(manifest)
            blobs = await _gather_bounded([store.load_index_segment(n) for n in names], LOAD_CONCURRENCY)
            if any(b is None for b in blobs):
                raise ValueError("a segment is missing")
            index = await run_blocking(SegmentIndex.load, manifest, dict(zip(names, blobs)))
        except ValueError as error:
            logger.warning("kb=%s: the keyword index snapshot is unusable (%s); indexing from the records",
                           self.kb_id, error)
            return None
        self.orphan_segments -= set(names)
        self.manifest_known = True
        return index

    async def continue_indexing(self, host: HostApi, collection_id: str, deadline: float) -> None:
        """Index files the snapshot lacks (and find them in the vector DB if storage has nothing),
        a batch at a time until `deadline`; then persist what changed."""
        changed = False
        while self.indexing and time.monotonic() < deadline:
            if not self.to_index and self.discovery is not None:
                found = await with_retries(lambda: self.discovery.step(host, collection_id))
                self.to_index.update(dict.fromkeys(sorted(f for f in found if f not in self.index)))
                if self.discovery.done:
                    self.discovery = None
                continue
            batch = list(itertools.islice(self.to_index, INDEX_BATCH))
            records = await self.file_records(host, collection_id, batch)
            async with self.lock:
                await self._index([r for r in records.values() if r.file_id not in self.index
                                   and r.file_id not in self.in_flight])
                for file_id in batch:
                    self.to_index.pop(file_id, None)
            changed = True
        if not self.indexing:
            # A repair ends once every file it found is indexed: the files of the last discovery
            # step are read above still without trusting their (possibly stale) stored records.
            self.trust_records = True
        if changed or self.index_dirty:
            await self._persist_index(KbStore(host, self.kb_id))
        if changed and not self.indexing:
            logger.info("kb=%s: keyword index complete: %d files / %d chunks", self.kb_id,
                        len(self.index.file_ids()), len(self.index))

    # ================================================================ ingest
    async def begin_ingest(self, store: KbStore, file_id: str, chunks: int) -> None:
        """Called before the first vector of `file_id` is written."""
        self.in_flight.add(file_id)
        if not await store.write_journal(JournalEntry(file_id, chunks)):
            logger.warning("kb=%s doc=%s: no ingest journal (plugin storage failed): a crash during this "
                           "ingest could leave vectors behind", self.kb_id, file_id)

    async def first_vectors_written(self, store: KbStore) -> None:
        """The KB now has vectors: clear the "never had a vector" mark at once, so that a restart
        does not take the KB for empty."""
        self.fresh = False
        if self.has_vectors is not True:
            self.has_vectors = True
            self.meta_dirty = not await store.save_meta(KbMeta(self.metric, True))

    async def set_metric(self, store: KbStore, metric: Metric) -> None:
        self.metric = metric
        self.has_vectors = True
        self.meta_dirty = not await store.save_meta(KbMeta(metric, True))

    async def commit_ingest(self, store: KbStore, record: FileRecord) -> bool:
        """The file's vectors are all written: remember it. Returns whether the record was saved."""
        file_id = record.file_id
        async with self.lock:
            saved = await store.save_record(record)
            await self._index([record])
            self.records.put(record)
            if saved:
                self.unsaved.pop(file_id, None)
                if self.stored_ids is not None:
                    self.stored_ids.add(file_id)
                self.look_in_vector_db = False  # as after a load: storage knows files, trust it
            else:
                self.unsaved[file_id] = record  # kept in memory until `flush` saves it
            self.undeleted_records.discard(file_id)
            self.to_index.pop(file_id, None)
            persisted = await self._persist_index(store)
            if saved and persisted:
                await self._clear_journal(store, file_id)
            # else the journal entry stays: a restart adopts the file (and indexes it)
            self.in_flight.discard(file_id)
        return saved

    async def abort_ingest(self, store: KbStore, file_id: str, vectors_removed: bool) -> None:
        """The ingest failed. Its journal entry goes only once its vectors are gone; otherwise the
        next reconciliation deletes them."""
        self.in_flight.discard(file_id)
        if vectors_removed:
            await self._clear_journal(store, file_id)
        else:
            self.journals.add(file_id)

    # ================================================================ delete
    async def delete_file(self, store: KbStore, file_id: str) -> None:
        """Forget a file whose vectors were deleted: the index first (and its snapshot), so that a
        crash after this never brings the file's text back, then its record."""
        async with self.lock:
            await self._unindex(store, file_id)
            self.unsaved.pop(file_id, None)
            self.records.drop(file_id)
            self.adopted = {c: r for c, r in self.adopted.items() if r.file_id != file_id}
            self.to_index.pop(file_id, None)
            await self._persist_index(store)
            if self.stored_ids is not None:
                self.stored_ids.discard(file_id)
            if not await store.delete_record(file_id):
                self.undeleted_records.add(file_id)
            await self._clear_journal(store, file_id)

    # ================================================================ upkeep
    async def flush(self, store: KbStore, deadline: float) -> None:
        """Retry the storage writes that failed earlier."""
        if self.meta_dirty and time.monotonic() < deadline:
            self.meta_dirty = not await store.save_meta(KbMeta(self.metric, self.has_vectors))
        for file_id, record in list(self.unsaved.items()):
            if time.monotonic() >= deadline:
                return
            if await store.save_record(record):
                self.unsaved.pop(file_id, None)
                if self.stored_ids is not None:
                    self.stored_ids.add(file_id)
                if not self.index_dirty:
                    await self._clear_journal(store, file_id)
        for file_id in list(self.undeleted_records):
            if time.monotonic() >= deadline:
                return
            if file_id in self.index or await store.delete_record(file_id):
                self.undeleted_records.discard(file_id)
        for file_id in list(self.undeleted_journals):
            if time.monotonic() >= deadline:
                return
            if await store.delete_journal(file_id):
                self.undeleted_journals.discard(file_id)
        if (self.index_dirty or self.pending_drops) and time.monotonic() < deadline:
            await self._persist_index(store)
        for name in sorted(self.orphan_segments - set(self.pending_segments)):
            # Only once the live manifest is known: a manifest that could not be read must not
            # turn its segments into "orphans".
            if time.monotonic() >= deadline or not self.manifest_known:
                return
            if await store.delete_index_segment(name):
                self.orphan_segments.discard(name)

    def needs_upkeep(self) -> bool:
        return bool(self.meta_dirty or self.unsaved or self.undeleted_records or self.undeleted_journals
                    or self.journals - self.in_flight or self.index_dirty or self.pending_drops
                    or (self.manifest_known and bool(self.orphan_segments))
                    or (self.loaded and self.indexing))

    async def upkeep(self, host: HostApi, collection_id: str, deadline: float) -> None:
        store = KbStore(host, self.kb_id)
        await self.flush(store, deadline)
        await self.reconcile(host, collection_id, deadline)
        if self.loaded and self.indexing:
            await self.continue_indexing(host, collection_id, deadline)

    async def reconcile(self, host: HostApi, collection_id: str, deadline: float) -> None:
        """Settle journal entries of ingests that never committed (see the module docstring)."""
        store = KbStore(host, self.kb_id)
        for file_id in sorted(self.journals - self.in_flight):
            if time.monotonic() >= deadline:
                return
            entry = await store.read_journal(file_id)
            if entry is None:  # already settled (or storage cannot tell): nothing to do
                self.journals.discard(file_id)
                continue
            if self.has_vectors is False:
                # The KB never got its first vector (the mark is cleared right after the first
                # upsert): touching the vector DB now could make Milvus create a wrong collection.
                await self._clear_journal(store, file_id)
                continue
            items = await with_retries(lambda f=file_id: file_vectors(host, collection_id, f))
            if entry.chunks > 0 and len(items) >= entry.chunks:
                record = await run_blocking(FileRecord.from_vector_items, file_id, items)
                async with self.lock:
                    stored = self.unsaved.get(file_id) or await store.load_record(file_id)
                    record = stored if stored is not None and len(stored.chunks) == len(record.chunks) else record
                    await self._index([record])
                    self.to_index.pop(file_id, None)
                    saved = stored is record or await store.save_record(record)
                    if saved:
                        self.unsaved.pop(file_id, None)
                    else:
                        self.unsaved[file_id] = record
                    if await self._persist_index(store) and saved:
                        await self._clear_journal(store, file_id)
                    else:
                        self.journals.discard(file_id)  # settled here; the entry goes with the next flush
                        self.undeleted_journals.add(file_id)
                logger.info("kb=%s doc=%s: adopted an ingest that finished before a restart (%d chunks)",
                            self.kb_id, file_id, len(items))
            else:
                if items:
                    await with_retries(lambda f=file_id: host.vector_delete(collection_id, file_ids=[f]))
                await self.delete_file(store, file_id)
                logger.warning("kb=%s doc=%s: removed %d vectors an interrupted ingest left behind",
                               self.kb_id, file_id, len(items))

    async def rebuild_from_vector_db(self, host: HostApi, collection_id: str, deadline: float = math.inf) -> bool:
        """Repair: forget the keyword index and the "no vectors yet" mark and derive everything
        from the vector DB again, file by file (records are rebuilt from the vectors and saved).
        Runs until `deadline`; later hooks continue. Returns whether it finished."""
        async with self.lock:
            async with self.index_guard:
                old = await run_blocking(self.index.take_changes)
                self.index = SegmentIndex()
                self.records.clear()
                self.adopted.clear()
                self.to_index = {}
                self.discovery = FileDiscovery()
                self.trust_records = False
                self.pending_segments.clear()
                self.pending_drops |= set(SegmentIndex.manifest_segment_names(old.manifest))
            store = KbStore(host, self.kb_id)
            self.fresh, self.has_vectors, self.loaded = False, True, True
            self.meta_dirty = not await store.save_meta(KbMeta(self.metric, True))
        await self.continue_indexing(host, collection_id, deadline)
        return not self.indexing

    def adopt_hit(self, result: dict[str, Any]) -> ChunkRecord | None:
        """A vector search returned a chunk we have no record of (storage lost): learn it from its
        metadata so it can be returned with text and citation."""
        chunk_id = str(result["id"])
        known = self.adopted.get(chunk_id)
        if known is not None:
            return known
        meta = result.get("metadata") or {}
        text = meta.get("text") or result.get("document")
        file_id = meta.get("file_id")
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
        self.journals.discard(file_id)
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
            record = self.unsaved.get(file_id) or self.records.get(file_id)
            if record is None and store is not None:
                record = await store.load_record(file_id)
            out[file_id] = None if record is None else await run_blocking(_tokenize_record, record)
        return out

    async def _persist_index(self, store: KbStore) -> bool:
        """Write what changed in the index since the last write: new segments, then the manifest,
        then drop the segments it no longer names. On a failure the rest waits for `flush`."""
        if not self.loaded:  # an index that never loaded its snapshot must not overwrite it
            self.index_dirty = True
            return False
        async with self.persist_guard:
            async with self.index_guard:
                changes = await run_blocking(self.index.take_changes)
            self.pending_segments.update(changes.new_segments)
            self.pending_manifest = changes.manifest
            for name in changes.dropped_segments:
                if self.pending_segments.pop(name, None) is None:
                    self.pending_drops.add(name)
            for name in sorted(self.pending_segments):
                if not await store.save_index_segment(name, self.pending_segments[name]):
                    self.index_dirty = True
                    return False
                del self.pending_segments[name]
            if self.pending_manifest is not None:
                if not await store.save_index_manifest(self.pending_manifest):
                    self.index_dirty = True
                    return False
                self.pending_manifest = None
                self.manifest_known = True
            self.index_dirty = False
            for name in sorted(self.pending_drops):
                if await store.delete_index_segment(name):
                    self.pending_drops.discard(name)
            return True


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


async def _gather_bounded(calls: list, limit: int) -> list:
    semaphore = asyncio.Semaphore(limit)

    async def one(call):
        async with semaphore:
            return await call

    return await asyncio.gather(*(one(c) for c in calls))
