"""Removing every vector of a deleted knowledge base, in bounded steps across invocations.

LangBot deletes a KB without touching its vectors and gives `on_knowledge_base_delete` ~30 s; a
task that outlives its invocation cannot call the host any more (SDK 0.7.18). So a deletion is a
resumable job: each `step` is one backend round trip; the hook runs steps until its budget is
spent, and every later invocation of the installation runs a few more (engine's upkeep) until the
vector DB lists nothing for the KB. A marker in plugin storage lets a restarted plugin resume it.
"""

from __future__ import annotations

import logging
import time

from .host import HostApi, describe, with_retries
from .store import KbStore
from .vectorscan import LIST_PAGE, file_ids_of

logger = logging.getLogger(__name__)

DELETE_BATCH = 100  # file ids per vector_delete(file_ids=...): the host deletes them one by one
FILTER_DELETE_BATCH = 500  # file ids per vector_delete(filters={"file_id": {"$in": ...}}): one backend call


class KbDeletion:
    def __init__(self, kb_id: str, known_file_ids: list[str]) -> None:
        self.kb_id = kb_id
        self.known = known_file_ids  # files we have records of: deleted by filter, 500 per call
        self.position = 0
        self.tried: set[str] = set()  # files found by listing and deleted by id
        self.deleted = 0
        self.done = False
        self.started = time.monotonic()

    async def run(self, host: HostApi, deadline: float) -> bool:
        """Steps until done or past `deadline`. Returns whether the KB is gone."""
        while not self.done and time.monotonic() < deadline:
            await self.step(host, deadline)
        return self.done

    async def step(self, host: HostApi, deadline: float) -> None:
        if self.position < len(self.known):
            await self._delete_known_batch(host)
            return
        # Whatever the DB still lists: offset 0 each round (deleting shrinks the listing, and
        # Milvus refuses offsets past 16384), by file id, until nothing new is listed.
        page = await with_retries(lambda: host.vector_list(self.kb_id, limit=LIST_PAGE, offset=0))
        items = (page or {}).get("items") or []
        new = sorted(file_ids_of(items) - self.tried)
        if new:
            for start in range(0, len(new), DELETE_BATCH):
                batch = new[start : start + DELETE_BATCH]
                await with_retries(lambda b=batch: host.vector_delete(self.kb_id, file_ids=b))
            self.tried.update(new)
            self.deleted += len(set(new) - set(self.known))
            return
        if items:
            logger.warning("kb=%s: %d vectors without a deletable file id are left", self.kb_id, len(items))
        if not await KbStore(host, self.kb_id).delete_everything(deadline):
            return  # plugin-storage keys left (budget, or storage failed): the next run continues
        self.done = True
        logger.info("kb=%s: knowledge base removed (%d files, %.1f s)", self.kb_id, self.deleted,
                    time.monotonic() - self.started)

    async def _delete_known_batch(self, host: HostApi) -> None:
        batch = self.known[self.position : self.position + FILTER_DELETE_BATCH]
        where = {"file_id": batch[0]} if len(batch) == 1 else {"file_id": {"$in": batch}}
        try:
            await with_retries(lambda: host.vector_delete(self.kb_id, filters=where))
        except Exception as error:  # noqa: BLE001 - the listing pass catches what is left
            logger.info("kb=%s: filter delete failed (%s); the listing pass deletes by file id", self.kb_id,
                        describe(error))
        self.position += len(batch)
        self.deleted += len(batch)
