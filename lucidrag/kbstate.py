"""In-memory state of one knowledge base, derived from the host's vector DB.

Holds every file's `FileRecord` (chunk order, headings, pages, parents) and the BM25 keyword index.
It is loaded lazily from plugin storage, or rebuilt from `vector_list` when storage has nothing or
fails, and updated in place on ingest and delete. One `KnowledgeBaseState` exists per
(installation, KB); its lock serialises mutations of that KB only.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field

from .host import HostApi, describe
from .keyword import BM25Index
from .records import ChunkRecord, FileRecord
from .scoring import Metric
from .storage_keys import meta_key
from .store import RecordStore

logger = logging.getLogger(__name__)

LIST_PAGE = 500
LIST_WINDOW = 16384  # Milvus refuses a query with offset + limit beyond this


@dataclass
class KnowledgeBaseState:
    kb_id: str
    files: dict[str, FileRecord] = field(default_factory=dict)
    chunks: dict[str, ChunkRecord] = field(default_factory=dict)
    index: BM25Index = field(default_factory=BM25Index)
    metric: Metric | None = None
    loaded: bool = False
    # True when plugin storage says this KB never had a vector (meta written at KB creation): then
    # nothing may touch the vector DB before the first upsert -- LangBot's Milvus adapter creates a
    # missing collection with dimension 1536 on any search/list/delete, which then refuses every
    # vector of another dimension.
    fresh: bool = False
    first_write: asyncio.Lock = field(default_factory=asyncio.Lock)  # see ingest: one creates the collection
    unsaved: set[str] = field(default_factory=set)  # file ids whose record save failed
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    # ---------------------------------------------------------------- mutations
    def put(self, record: FileRecord) -> None:
        self.drop(record.file_id)
        self.files[record.file_id] = record
        for chunk in record.chunks:
            self.chunks[chunk.chunk_id] = chunk
        self.index.add(record.file_id, [(c.chunk_id, c.text, c.heading) for c in record.chunks])

    def drop(self, file_id: str) -> None:
        old = self.files.pop(file_id, None)
        if old is not None:
            for chunk in old.chunks:
                self.chunks.pop(chunk.chunk_id, None)
        self.index.remove(file_id)
        self.unsaved.discard(file_id)

    # ---------------------------------------------------------------- lookups
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

    # ---------------------------------------------------------------- loading
    async def ensure_loaded(self, host: HostApi, store: RecordStore, collection_id: str) -> None:
        if self.loaded:
            return
        async with self.lock:
            if self.loaded:
                return
            await self._load(host, store, collection_id)
            self.loaded = True

    async def _load(self, host: HostApi, store: RecordStore, collection_id: str) -> None:
        meta = await load_meta(host, self.kb_id)
        self.metric = _metric_of(meta)
        file_ids = await store.file_ids(self.kb_id)
        records = []
        for file_id in file_ids or []:
            record = await store.load(self.kb_id, file_id)
            if record is not None:
                records.append(record)
        if not records and meta is not None and meta.get("vectors") is False:
            self.fresh = True
            source = "nothing (new knowledge base)"
        elif not records:
            records = await rebuild_from_vectors(host, collection_id)
            source = "vector DB"
        else:
            source = "plugin storage"
        for record in records:
            self.put(record)
        logger.info("kb=%s: loaded %d files / %d chunks from %s", self.kb_id, len(self.files),
                    len(self.chunks), source)


async def list_all_vectors(host: HostApi, collection_id: str) -> list[dict]:
    """Every stored item of a collection. Pages by offset within Milvus' query window
    (offset + limit <= 16384); beyond it, lists file by file: files seen so far by `file_id`, then
    the next unseen files with `file_id $nin` (offset 0) until none is left."""
    items: dict[str, dict] = {}
    offset = 0
    while offset + LIST_PAGE <= LIST_WINDOW:
        page = await host.vector_list(collection_id, limit=LIST_PAGE, offset=offset)
        batch = (page or {}).get("items") or []
        for item in batch:
            items[str(item.get("id"))] = item
        if len(batch) < LIST_PAGE:
            return list(items.values())
        offset += len(batch)
    known = _file_ids(items.values())
    pending = set(known)
    while pending:
        for file_id in sorted(pending):
            for item in await _list_filtered(host, collection_id, {"file_id": file_id}):
                items[str(item.get("id"))] = item
        page = await host.vector_list(collection_id, filters={"file_id": {"$nin": sorted(known)}},
                                      limit=LIST_PAGE, offset=0)
        pending = _file_ids((page or {}).get("items") or []) - known
        known |= pending
    return list(items.values())


async def _list_filtered(host: HostApi, collection_id: str, filters: dict) -> list[dict]:
    out: list[dict] = []
    offset = 0
    while offset + LIST_PAGE <= LIST_WINDOW:
        page = await host.vector_list(collection_id, filters=filters, limit=LIST_PAGE, offset=offset)
        batch = (page or {}).get("items") or []
        out.extend(batch)
        if len(batch) < LIST_PAGE:
            break
        offset += len(batch)
    return out


def _file_ids(items) -> set[str]:
    return {str(f) for f in ((i.get("metadata") or {}).get("file_id") for i in items) if f}


async def rebuild_from_vectors(host: HostApi, collection_id: str) -> list[FileRecord]:
    try:
        items = await list_all_vectors(host, collection_id)
    except Exception as error:  # noqa: BLE001 - an empty/new collection may not exist yet
        logger.info("kb=%s: nothing to rebuild from the vector DB (%s)", collection_id, describe(error))
        return []
    by_file: dict[str, list[dict]] = {}
    for item in items:
        file_id = (item.get("metadata") or {}).get("file_id")
        if file_id:
            by_file.setdefault(str(file_id), []).append(item)
    return [FileRecord.from_vector_items(fid, its) for fid, its in by_file.items()]


def _metric_of(meta: dict | None) -> Metric | None:
    try:
        return Metric(meta["metric"]) if meta and meta.get("metric") else None
    except ValueError:
        return None


async def load_meta(host: HostApi, kb_id: str) -> dict | None:
    """The KB's stored facts: {"metric": str | None, "vectors": bool}; None if unknown."""
    try:
        raw = await host.get_plugin_storage(meta_key(kb_id))
        meta = json.loads(raw) if raw else None
        return meta if isinstance(meta, dict) else None
    except Exception:  # noqa: BLE001 - missing key or storage down: calibrate again later
        return None


async def save_meta(host: HostApi, kb_id: str, metric: Metric | None, vectors: bool) -> None:
    meta = {"metric": metric.value if metric else None, "vectors": vectors}
    try:
        await host.set_plugin_storage(meta_key(kb_id), json.dumps(meta).encode())
    except Exception as error:  # noqa: BLE001
        logger.warning("kb=%s: could not save the knowledge base's metadata (%s)", kb_id, describe(error))


async def save_metric(host: HostApi, kb_id: str, metric: Metric) -> None:
    await save_meta(host, kb_id, metric, vectors=True)
