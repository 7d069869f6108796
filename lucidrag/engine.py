"""The engine's entry points, one per host hook, over per-installation state.

A shared runtime serves many installations from one object graph, so nothing tenant-specific
lives in a module global: `Engine` holds one `Installation` per installation id, and each of those
holds per-KB state. The component passes the host API and the installation id with every call.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .embedding import Embedder, VectorCache, with_retries
from .errors import VectorStoreFailure
from .filters import normalise_filters
from .host import HostApi, describe
from .ingest import IngestOutcome, IngestRequest, ingest_file
from .kbstate import KnowledgeBaseState, list_all_vectors
from .retrieve import Hit, RetrieveRequest, retrieve
from .settings import parse_creation_settings, parse_retrieval_settings
from .store import RecordStore, kb_prefix

logger = logging.getLogger(__name__)

DELETE_BATCH = 100


@dataclass
class Installation:
    cache: VectorCache = field(default_factory=VectorCache)
    batch_sizes: dict[str, int] = field(default_factory=dict)
    kbs: dict[str, KnowledgeBaseState] = field(default_factory=dict)

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
        self.installations.pop(installation_id, None)

    # ------------------------------------------------------------------ hooks
    async def ingest(self, host: HostApi, installation_id: str, request: IngestRequest) -> IngestOutcome:
        inst = self.installation(installation_id)
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
        await self._retry_unsaved(state, store)
        embedder = Embedder(host, inst.cache, inst.batch_sizes)
        request = RetrieveRequest(kb_id, collection_id, query, creation, settings, where)
        return await retrieve(host, state, embedder, request)

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
        Returns the number of files whose vectors were deleted."""
        inst = self.installation(installation_id)
        store = RecordStore(host)
        file_ids = set(await store.file_ids(kb_id) or [])
        state = inst.kbs.get(kb_id)
        if state is not None:
            file_ids.update(state.files)
        deleted = await _delete_files(host, kb_id, sorted(file_ids))
        # Anything the records did not know about (a failed storage write): find it in the DB.
        leftovers = {str((i.get("metadata") or {}).get("file_id")) for i in await list_all_vectors(host, kb_id)}
        leftovers.discard("None")
        deleted += await _delete_files(host, kb_id, sorted(leftovers))
        await _delete_storage(host, kb_id)
        inst.kbs.pop(kb_id, None)
        inst.cache.drop_kb(kb_id)
        logger.info("kb=%s: knowledge base removed (%d files)", kb_id, deleted)
        return deleted

    async def _retry_unsaved(self, state: KnowledgeBaseState, store: RecordStore) -> None:
        for file_id in list(state.unsaved):
            record = state.files.get(file_id)
            if record is None or await store.save(state.kb_id, record):
                state.unsaved.discard(file_id)


async def _delete_files(host: HostApi, kb_id: str, file_ids: list[str]) -> int:
    for start in range(0, len(file_ids), DELETE_BATCH):
        batch = file_ids[start : start + DELETE_BATCH]
        await with_retries(lambda b=batch: host.vector_delete(kb_id, file_ids=b))
    return len(file_ids)


async def _delete_storage(host: HostApi, kb_id: str) -> None:
    prefix = kb_prefix(kb_id)
    try:
        keys = [k for k in await host.get_plugin_storage_keys() if k.startswith(prefix)]
        for key in keys:
            await host.delete_plugin_storage(key)
    except Exception as error:  # noqa: BLE001 - storage is best effort
        logger.warning("kb=%s: could not remove plugin storage (%s)", kb_id, describe(error))
