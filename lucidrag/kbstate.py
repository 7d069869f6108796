"""The state of one knowledge base, and the only code that changes it.

One `KnowledgeBaseState` exists per (installation, KB). It holds every file's `FileRecord` (chunk
order, headings, pages, parents) and the BM25 keyword index, all derived from the host's vector DB
(the source of truth) and persisted in plugin storage through `store.KbStore`. Every mutation is a
method here: an ingest's begin / first write / commit / abort, a file's deletion, the lazy load,
reconciliation after a restart, and retrying storage writes that failed.

Crash safety: before an ingest writes its first vector it records a journal entry (file id, number
of chunks). Commit saves the FileRecord and removes the entry. An entry found after a restart
belongs to an ingest that never committed: if every chunk's vector is there, the ingest finished
and only its bookkeeping was lost, so the file is adopted from its vectors; otherwise its vectors
are orphans and are deleted. Journal entries of ingests running in this process are never touched.

CPU work (decoding, tokenising, index updates) runs in threads; the index is only read or changed
under `index_guard`, so a query never sees it half-updated and the event loop never stalls on it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from .blocking import run_blocking
from .host import HostApi, describe, with_retries
from .keyword import BM25Index, TokenizedChunk, tokenize_chunks
from .records import ChunkRecord, FileRecord
from .scoring import Metric
from .store import JournalEntry, KbMeta, KbStore, KeySnapshot, decode_record, list_keys
from .vectorscan import file_vectors, list_all_vectors, records_from_items

logger = logging.getLogger(__name__)

LOAD_CONCURRENCY = 8  # storage reads in flight while loading a KB


@dataclass
class KnowledgeBaseState:
    kb_id: str
    files: dict[str, FileRecord] = field(default_factory=dict)
    chunks: dict[str, ChunkRecord] = field(default_factory=dict)
    index: BM25Index = field(default_factory=BM25Index)
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
    first_write: asyncio.Lock = field(default_factory=asyncio.Lock)  # one creates the collection
    stored_ids: set[str] | None = None  # file ids with a record in plugin storage, once listed
    in_flight: set[str] = field(default_factory=set)  # ingests of this process past begin_ingest
    journals: set[str] = field(default_factory=set)  # journal entries of earlier processes
    # storage writes that failed, retried by `flush`
    unsaved: set[str] = field(default_factory=set)
    undeleted_records: set[str] = field(default_factory=set)
    undeleted_journals: set[str] = field(default_factory=set)
    meta_dirty: bool = False

    # ================================================================ reads
    def neighbours(self, chunk: ChunkRecord, window: int) -> list[ChunkRecord]:
        """The chunk and up to `window` chunks either side of it in the same file, in order."""
        record = self.files.get(chunk.file_id)
        if record is None:
            return [chunk]
        position = next((i for i, c in enumerate(record.chunks) if c.index == chunk.index), None)
        if position is None:
            return [chunk]
        return record.chunks[max(0, position - window) : position + window + 1]

    def parent_text(self, chunk: ChunkRecord) -> str | None:
        record = self.files.get(chunk.file_id)
        if record is None or chunk.parent is None or chunk.parent >= len(record.parents):
            return None
        return record.parents[chunk.parent]

    @property
    def unsettled(self) -> set[str]:
        """Files whose vectors may be incomplete: ingests running now or cut short by a crash."""
        return self.journals | self.in_flight

    async def keyword_search(self, query: str, top_k: int, file_ids: set[str] | None = None) -> list[tuple[str, float]]:
        async with self.index_guard:
            return self.index.search(query, top_k=top_k, file_ids=file_ids)

    async def keyword_term_scores(self, query: str, chunks_by_file: dict[str, list[str]]
                                  ) -> dict[str, dict[str, float]]:
        """Per-term BM25 contributions of the given chunks (``BM25Index.term_scores``)."""
        async with self.index_guard:
            out: dict[str, dict[str, float]] = {}
            for file_id, chunk_ids in chunks_by_file.items():
                out.update(self.index.term_scores(query, file_id, chunk_ids))
            return out

    async def term_weights(self, query: str) -> dict[str, float]:
        async with self.index_guard:
            return self.index.term_weights(query)

    async def is_stored(self, store: KbStore, file_id: str) -> bool:
        """Whether this file id may already have vectors (a re-ingest). Lists storage keys at most
        once per process for this KB, so bulk uploads cost one listing, not one per file."""
        if file_id in self.files or file_id in self.in_flight or file_id in self.journals:
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

    # ================================================================ loading
    async def ensure_loaded(self, host: HostApi, collection_id: str) -> None:
        if self.loaded:
            return
        async with self.lock:
            if not self.loaded:
                await self._load(host, collection_id)
                self.loaded = True

    async def _load(self, host: HostApi, collection_id: str) -> None:
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
        wanted = sorted(f for f in self.stored_ids or () if f not in self.files)
        blobs = await _gather_bounded([store.load_record_blob(f) for f in wanted], LOAD_CONCURRENCY)
        records = await run_blocking(_decode_records, self.kb_id, list(zip(wanted, blobs)))
        if records or (self.stored_ids and not wanted):  # (all of them already in memory)
            source = "plugin storage"
        elif self.has_vectors is False:
            self.fresh = not self.files
            source = "nothing (new knowledge base)"
        else:  # storage has nothing usable: the vector DB has everything
            records = await self._records_from_vector_db(host, collection_id)
            source = "the vector DB"
        await self._index([r for r in records if r.file_id not in self.files])
        logger.info("kb=%s: loaded %d files / %d chunks from %s", self.kb_id, len(self.files), len(self.chunks), source)

    async def _records_from_vector_db(self, host: HostApi, collection_id: str) -> list[FileRecord]:
        try:
            items = await list_all_vectors(host, collection_id)
        except Exception as error:  # noqa: BLE001 - an empty/new collection may not exist yet
            logger.info("kb=%s: nothing to rebuild from the vector DB (%s)", self.kb_id, describe(error))
            return []
        return await run_blocking(records_from_items, items)

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
        async with self.lock:
            await self._index([record])
            saved = await store.save_record(record)
            if saved:
                self.unsaved.discard(record.file_id)
                if self.stored_ids is not None:
                    self.stored_ids.add(record.file_id)
                await self._clear_journal(store, record.file_id)
            else:
                self.unsaved.add(record.file_id)  # the journal entry stays: a restart adopts the file
            self.undeleted_records.discard(record.file_id)
            self.in_flight.discard(record.file_id)
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
        """Forget a file whose vectors were deleted."""
        async with self.lock:
            await self._unindex(file_id)
            self.unsaved.discard(file_id)
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
        for file_id in list(self.unsaved):
            if time.monotonic() >= deadline:
                return
            record = self.files.get(file_id)
            if record is None or await store.save_record(record):
                self.unsaved.discard(file_id)
                await self._clear_journal(store, file_id)
        for file_id in list(self.undeleted_records):
            if time.monotonic() >= deadline:
                return
            if file_id in self.files or await store.delete_record(file_id):
                self.undeleted_records.discard(file_id)
        for file_id in list(self.undeleted_journals):
            if time.monotonic() >= deadline:
                return
            if await store.delete_journal(file_id):
                self.undeleted_journals.discard(file_id)

    def needs_upkeep(self) -> bool:
        return bool(self.meta_dirty or self.unsaved or self.undeleted_records or self.undeleted_journals
                    or self.journals - self.in_flight)

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
                    if file_id not in self.files:
                        await self._index([record])
                    if await store.save_record(record):
                        await self._clear_journal(store, file_id)
                    else:
                        self.unsaved.add(file_id)
                logger.info("kb=%s doc=%s: adopted an ingest that finished before a restart (%d chunks)",
                            self.kb_id, file_id, len(items))
            else:
                if items:
                    await with_retries(lambda f=file_id: host.vector_delete(collection_id, file_ids=[f]))
                async with self.lock:
                    await self._unindex(file_id)
                    await store.delete_record(file_id)
                    await self._clear_journal(store, file_id)
                logger.warning("kb=%s doc=%s: removed %d vectors an interrupted ingest left behind",
                               self.kb_id, file_id, len(items))

    async def rebuild_from_vector_db(self, host: HostApi, collection_id: str) -> int:
        """Repair: forget what plugin storage said and derive everything from the vector DB again
        (the "no vectors yet" mark included). Returns the number of files found."""
        async with self.lock:
            items = await list_all_vectors(host, collection_id)
            records = await run_blocking(records_from_items, items)
            async with self.index_guard:
                self.files.clear()
                self.chunks.clear()
                self.index = BM25Index()
            await self._index(records)
            store = KbStore(host, self.kb_id)
            self.fresh, self.has_vectors, self.loaded = False, True, True
            self.meta_dirty = not await store.save_meta(KbMeta(self.metric, True))
            for record in records:
                if await store.save_record(record):
                    self.unsaved.discard(record.file_id)
                else:
                    self.unsaved.add(record.file_id)
        logger.info("kb=%s: rebuilt from the vector DB: %d files / %d chunks", self.kb_id, len(self.files),
                    len(self.chunks))
        return len(records)

    def adopt_hit(self, result: dict[str, Any]) -> None:
        """A vector search returned a chunk we have no record of (storage lost): learn it from its
        metadata so it can be returned with text and citation."""
        chunk_id = str(result["id"])
        if chunk_id in self.chunks:
            return
        meta = result.get("metadata") or {}
        text = meta.get("text") or result.get("document")
        file_id = meta.get("file_id")
        if not text or not file_id:
            return
        index = meta.get("chunk_index")
        page = meta.get("page")
        self.chunks[chunk_id] = ChunkRecord(
            chunk_id, str(file_id), int(index) if isinstance(index, (int, float)) else 0, str(text),
            str(meta.get("heading") or ""), int(page) if isinstance(page, (int, float)) and page else None,
            document_name=str(meta.get("document_name") or ""),
        )

    # ================================================================ internals
    async def _clear_journal(self, store: KbStore, file_id: str) -> None:
        self.journals.discard(file_id)
        if await store.delete_journal(file_id):
            self.undeleted_journals.discard(file_id)
        else:
            self.undeleted_journals.add(file_id)

    async def _index(self, records: list[FileRecord]) -> None:
        """Add (or replace) files: tokenised in a thread, indexed in a thread under the guard."""
        if not records:
            return
        tokenized = await run_blocking(_tokenize_records, records)
        async with self.index_guard:
            await run_blocking(_add_all, self.index, tokenized)
            for record in records:
                old = self.files.pop(record.file_id, None)
                for chunk in old.chunks if old else ():
                    self.chunks.pop(chunk.chunk_id, None)
                self.files[record.file_id] = record
                for chunk in record.chunks:
                    self.chunks[chunk.chunk_id] = chunk

    async def _unindex(self, file_id: str) -> None:
        async with self.index_guard:
            old = self.files.pop(file_id, None)
            for chunk in old.chunks if old else ():
                self.chunks.pop(chunk.chunk_id, None)
            if file_id in self.index:
                await run_blocking(self.index.remove, file_id)


def _decode_records(kb_id: str, blobs: list[tuple[str, bytes | None]]) -> list[FileRecord]:
    return [r for r in (decode_record(kb_id, f, b) for f, b in blobs) if r is not None]


def _tokenize_records(records: list[FileRecord]) -> list[tuple[str, list[TokenizedChunk]]]:
    return [(r.file_id, tokenize_chunks([(c.chunk_id, c.text, c.heading) for c in r.chunks])) for r in records]


def _add_all(index: BM25Index, tokenized: list[tuple[str, list[TokenizedChunk]]]) -> None:
    for file_id, chunks in tokenized:
        index.add_tokenized(file_id, chunks)


async def _gather_bounded(calls: list, limit: int) -> list:
    semaphore = asyncio.Semaphore(limit)

    async def one(call):
        async with semaphore:
            return await call

    return await asyncio.gather(*(one(c) for c in calls))

