"""The engine's entry points, one per host hook, over per-installation state.

A shared runtime serves many installations from one object graph, so nothing tenant-specific
lives in a module global: `Engine` holds one `Installation` per installation id, and each of those
holds per-KB state. The component passes the host API and the installation id with every call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .embedding import BatchSize, Embedder, VectorCache, with_retries
from .errors import VectorStoreFailure
from .filters import matches, normalise_filters
from .host import HostApi, describe
from .ingest import IngestOutcome, IngestRequest, ingest_file
from .kbstate import LIST_PAGE, KnowledgeBaseState, load_meta, save_meta
from .retrieve import Hit, RetrieveRequest, retrieve
from .settings import parse_creation_settings, parse_retrieval_settings
from .storage_keys import keys_of_kb, pending_kb_delete_key, pending_kb_deletes
from .store import RecordStore

logger = logging.getLogger(__name__)

DELETE_BATCH = 100  # file ids per vector_delete(file_ids=...): the host deletes them one by one
FILTER_DELETE_BATCH = 500  # file ids per vector_delete(filters={"file_id": {"$in": ...}}): one backend call
KB_DELETE_BUDGET_S = 20.0  # on_knowledge_base_delete has ~30 s; the rest continues in the background
MAX_FILTER_FETCH = 1000  # most vectors one filtered search asks for (see LocalFilterHost)


@dataclass
class Installation:
    cache: VectorCache = field(default_factory=VectorCache)
    batch_sizes: dict[str, BatchSize] = field(default_factory=dict)
    kbs: dict[str, KnowledgeBaseState] = field(default_factory=dict)
    background: dict[str, asyncio.Task] = field(default_factory=dict)  # KB deletions still running
    resumed: bool = False  # pending KB deletions of an earlier process looked for

    def kb(self, kb_id: str) -> KnowledgeBaseState:
        state = self.kbs.get(kb_id)
        if state is None:
            state = self.kbs[kb_id] = KnowledgeBaseState(kb_id)
        return state


class Engine:
    def __init__(self) -> None:
        self.installations: dict[str, Installation] = {}

    def installation(self, installation_id: str) -> Installation:
        inst = self.installations.get(installation_id)
        if inst is None:
            inst = self.installations[installation_id] = Installation()
        return inst

    def revoke(self, installation_id: str) -> None:
        inst = self.installations.pop(installation_id, None)
        for task in (inst.background.values() if inst else ()):
            task.cancel()

    async def create_knowledge_base(self, host: HostApi, installation_id: str, kb_id: str) -> None:
        """Remember that the new KB has no vectors yet, so that nothing touches the vector DB before
        its first upsert (see KnowledgeBaseState.fresh). Best effort."""
        await save_meta(host, kb_id, None, vectors=False)

    # ------------------------------------------------------------------ hooks
    async def ingest(self, host: HostApi, installation_id: str, request: IngestRequest) -> IngestOutcome:
        inst = self.installation(installation_id)
        await self._resume_pending_deletes(host, inst)
        embedder = Embedder(host, inst.cache, inst.batch_sizes)
        return await ingest_file(host, inst.kb(request.kb_id), RecordStore(host), embedder, request)

    async def retrieve(self, host: HostApi, installation_id: str, kb_id: str, collection_id: str,
                       query: str, creation_settings: Mapping[str, Any],
                       retrieval_settings: Mapping[str, Any], filters: Mapping[str, Any] | None) -> list[Hit]:
        creation = parse_creation_settings(creation_settings)
        settings = parse_retrieval_settings(retrieval_settings)
        where = normalise_filters(filters)
        inst = self.installation(installation_id)
        state = inst.kb(kb_id)
        store = RecordStore(host)
        await state.ensure_loaded(host, store, collection_id)
        if state.fresh and not state.files:
            return []  # no vector yet: a search would make Milvus create a wrong-dimension collection
        await self._retry_unsaved(state, store)
        await self._resume_pending_deletes(host, inst)
        embedder = Embedder(host, inst.cache, inst.batch_sizes)
        request = RetrieveRequest(kb_id, collection_id, query, creation, settings, where)
        return await retrieve(LocalFilterHost(host, state) if where else host, state, embedder, request)

    async def delete_document(self, host: HostApi, installation_id: str, kb_id: str, document_id: str) -> None:
        """Remove every vector and record of one file. Raises VectorStoreFailure if the host failed."""
        state = self.installation(installation_id).kb(kb_id)
        # Under the KB lock, so a first load running concurrently cannot bring the record back.
        async with state.lock:
            try:
                await with_retries(lambda: host.vector_delete(kb_id, file_ids=[document_id]))
            except Exception as error:  # noqa: BLE001
                raise VectorStoreFailure(f"The vector database did not delete the file: {describe(error)}") from error
            state.drop(document_id)
            await RecordStore(host).delete(kb_id, document_id)
        logger.info("kb=%s doc=%s: deleted", kb_id, document_id)

    async def delete_knowledge_base(self, host: HostApi, installation_id: str, kb_id: str) -> int:
        """Remove every vector of the KB (the host leaves them behind) and all derived state.

        Known files go with one backend call per 500 (`file_id $in` filter); then whatever the
        vector DB still lists (files whose record was never saved, a filter delete a backend
        ignored) is deleted by file id until the listing is empty. What is left when the budget
        (20 s of the hook's 30 s) runs out continues in a background task; a marker in plugin
        storage lets a restarted plugin finish it. Returns the number of files seen."""
        inst = self.installation(installation_id)
        store = RecordStore(host)
        file_ids = set(await store.file_ids(kb_id) or [])
        state = inst.kbs.pop(kb_id, None)
        if state is not None:
            file_ids.update(state.files)
        meta = await load_meta(host, kb_id)
        never_written = not file_ids and meta is not None and meta.get("vectors") is False
        inst.cache.drop_kb(kb_id)
        if never_written:  # listing would make Milvus create a collection for a deleted KB
            await _delete_storage(host, kb_id)
            return 0
        await _mark_pending(host, kb_id)
        job = _KbDeletion(host, kb_id, sorted(file_ids))
        task = asyncio.get_running_loop().create_task(job.run())
        inst.background[kb_id] = task
        task.add_done_callback(lambda t, k=kb_id: inst.background.pop(k, None) if inst.background.get(k) is t else None)
        done, _ = await asyncio.wait({task}, timeout=KB_DELETE_BUDGET_S)
        if task in done:
            return task.result()
        logger.warning("kb=%s: knowledge base deletion continues in the background (%d files so far)",
                       kb_id, job.deleted)
        return job.deleted

    async def _resume_pending_deletes(self, host: HostApi, inst: Installation) -> None:
        """Finish KB deletions an earlier plugin process left unfinished (once per process)."""
        if inst.resumed:
            return
        inst.resumed = True
        try:
            pending = pending_kb_deletes(await host.get_plugin_storage_keys())
        except Exception:  # noqa: BLE001 - storage is best effort
            return
        for kb_id in pending:
            if kb_id not in inst.background:
                logger.info("kb=%s: resuming an unfinished knowledge base deletion", kb_id)
                inst.background[kb_id] = asyncio.get_running_loop().create_task(_KbDeletion(host, kb_id, []).run())

    async def _retry_unsaved(self, state: KnowledgeBaseState, store: RecordStore) -> None:
        for file_id in list(state.unsaved):
            record = state.files.get(file_id)
            if record is None or await store.save(state.kb_id, record):
                state.unsaved.discard(file_id)


class _KbDeletion:
    def __init__(self, host: HostApi, kb_id: str, file_ids: list[str]) -> None:
        self.host, self.kb_id, self.file_ids = host, kb_id, file_ids
        self.deleted = 0

    async def run(self) -> int:
        t0 = time.monotonic()
        host, kb_id = self.host, self.kb_id
        for start in range(0, len(self.file_ids), FILTER_DELETE_BATCH):
            batch = self.file_ids[start : start + FILTER_DELETE_BATCH]
            where = {"file_id": batch[0]} if len(batch) == 1 else {"file_id": {"$in": batch}}
            try:
                await with_retries(lambda w=where: host.vector_delete(kb_id, filters=w))
            except Exception as error:  # noqa: BLE001 - the by-id pass below catches what is left
                logger.info("kb=%s: filter delete failed (%s); deleting by file id", kb_id, describe(error))
                await _delete_by_file_ids(host, kb_id, batch)
            self.deleted += len(batch)
        # Whatever the DB still lists: offset 0 each round (deleting shrinks the listing, and
        # Milvus refuses offsets past 16384), by file id, until nothing new is listed.
        tried: set[str] = set()
        while True:
            page = await with_retries(lambda: host.vector_list(kb_id, limit=LIST_PAGE, offset=0))
            items = (page or {}).get("items") or []
            found = {str(f) for f in ((i.get("metadata") or {}).get("file_id") for i in items) if f}
            new = sorted(found - tried)
            if not new:
                if items:
                    logger.warning("kb=%s: %d vectors without a deletable file id are left", kb_id, len(items))
                break
            await _delete_by_file_ids(host, kb_id, new)
            tried.update(new)
            self.deleted += len(set(new) - set(self.file_ids))
        await _delete_storage(host, kb_id)
        logger.info("kb=%s: knowledge base removed (%d files, %.1f s)", kb_id, self.deleted, time.monotonic() - t0)
        return self.deleted


async def _delete_by_file_ids(host: HostApi, kb_id: str, file_ids: list[str]) -> None:
    for start in range(0, len(file_ids), DELETE_BATCH):
        batch = file_ids[start : start + DELETE_BATCH]
        await with_retries(lambda b=batch: host.vector_delete(kb_id, file_ids=b))


async def _mark_pending(host: HostApi, kb_id: str) -> None:
    try:
        await host.set_plugin_storage(pending_kb_delete_key(kb_id), json.dumps({"since": time.time()}).encode())
    except Exception:  # noqa: BLE001 - storage is best effort
        pass


async def _delete_storage(host: HostApi, kb_id: str) -> None:
    try:
        keys = keys_of_kb(await host.get_plugin_storage_keys(), kb_id)
        for key in keys:
            await host.delete_plugin_storage(key)
    except Exception as error:  # noqa: BLE001 - storage is best effort
        logger.warning("kb=%s: could not remove plugin storage (%s)", kb_id, describe(error))


class LocalFilterHost:
    """The host, except that a filtered `vector_search` is evaluated against the KB's FileRecords.

    LangBot's Milvus and pgvector adapters keep only text / file_id / uuid and silently drop a
    filter clause on any other key, and `$and`/`$or` altogether, so a filter on `page`, `heading`,
    `format` or several keys would return unfiltered results there. Every backend gets the same
    treatment instead: the filter selects chunks locally; the backend is asked only for the files
    they belong to (`file_id` / `file_id $in`, which all adapters support), fetching more when the
    filter keeps only part of those files (at most MAX_FILTER_FETCH), and the results are cut to the
    matching chunks."""

    def __init__(self, host: HostApi, state: KnowledgeBaseState) -> None:
        self._host = host
        self._state = state

    def __getattr__(self, name: str) -> Any:
        return getattr(self._host, name)

    async def vector_search(self, collection_id: str, query_vector: list[float], top_k: int = 5,
                            filters: dict[str, Any] | None = None, search_type: str = "vector",
                            query_text: str = "", vector_weight: float | None = None) -> list[dict[str, Any]]:
        if not filters:
            return await self._host.vector_search(collection_id, query_vector, top_k=top_k,
                                                  search_type=search_type, query_text=query_text,
                                                  vector_weight=vector_weight)
        state = self._state
        if _fields(filters) <= {"file_id"}:
            files = sorted(f for f in state.files if matches(filters, {"file_id": f}))
            chunk_ids = None  # every chunk of those files matches
            fetch = top_k
        else:
            chunk_ids = set()
            total = 0
            file_set: set[str] = set()
            for record in state.files.values():
                hit = [c.chunk_id for c in record.chunks if matches(filters, c.metadata(record.format))]
                if hit:
                    chunk_ids.update(hit)
                    file_set.add(record.file_id)
                    total += len(record.chunks)
            files = sorted(file_set)
            fetch = min(MAX_FILTER_FETCH, max(top_k, -(-top_k * total // max(1, len(chunk_ids)))))
        if not files:
            return []
        pushed = {"file_id": files[0]} if len(files) == 1 else {"file_id": {"$in": files}}
        results = await self._host.vector_search(collection_id, query_vector, top_k=fetch, filters=pushed,
                                                 search_type=search_type, query_text=query_text,
                                                 vector_weight=vector_weight)
        if chunk_ids is not None:
            results = [r for r in results if str(r.get("id")) in chunk_ids]
        else:
            wanted = set(files)
            results = [r for r in results if str((r.get("metadata") or {}).get("file_id")) in wanted]
        return results[:top_k]


def _fields(where: Mapping[str, Any]) -> set[str]:
    out: set[str] = set()
    for key, value in where.items():
        if key in ("$and", "$or"):
            for part in value:
                out |= _fields(part)
        else:
            out.add(key)
    return out
