"""Removing every vector and key of a deleted knowledge base, in bounded steps.

LangBot deletes a KB without touching its vectors, gives `on_knowledge_base_delete` 30 s, then
deletes the KB's row, after which it refuses every vector call for that KB; a task that outlives
its invocation cannot call the host any more (SDK 0.7.18). So the vectors must go inside the hook
(one filter delete removes them all on every adapter), and the rest is a resumable job: each
`step` is one round trip; the hook runs steps until its budget is spent, and later invocations of
the installation run more (engine's upkeep) until the KB's plugin-storage keys are gone too. A
marker in plugin storage lets a restarted plugin resume it.
"""

from __future__ import annotations

import logging
import time

from lucidrag.base.budget import BudgetSpent
from lucidrag.base.budget import deadline as hook_deadline
from lucidrag.base.host import HostApi, describe, is_kb_gone, with_retries
from lucidrag.state.latewrites import storage_writes_may_land
from lucidrag.state.store import KbStore
from lucidrag.vectors.vectorscan import LIST_PAGE, file_ids_of

logger = logging.getLogger(__name__)

DELETE_BATCH = 100  # file ids per vector_delete(file_ids=...): the host deletes them one by one
FILTER_DELETE_BATCH = 500  # file ids per vector_delete(filters={"file_id": {"$in": ...}}): one backend call


ALL_VECTORS = {"file_id": {"$ne": ""}}  # every vector LucidRAG wrote (all carry a file_id)


class KbDeletion:
    """Vectors first, all in one filter delete when the backend takes it (every LangBot adapter
    translates `$ne`), then file by file from what the vector DB still lists; then the KB's
    plugin-storage keys. LangBot deletes the KB's row as soon as the hook returns and refuses
    vector calls for it from then on, so vectors are only reachable inside the hook; the keys
    (tens of thousands for a big KB) are finished by later hooks."""

    def __init__(self, kb_id: str, known_file_ids: list[str]) -> None:
        self.kb_id = kb_id
        self.known = known_file_ids  # files we have records of: deleted by filter, 500 per call
        self.position = 0
        self.bulk: bool | None = None  # whether the one-call delete of every vector worked
        self.tried: set[str] = set()  # files found by listing and deleted by id
        self.deleted = 0
        self.vectors_done = False
        self.keys_swept = False  # this run deleted every key listed, but a write given up on may still land
        self.done = False
        self.started = time.monotonic()

    async def run(self, host: HostApi, deadline: float) -> bool:
        """Steps until done or past `deadline` (or the hook's own, base/budget.py). Returns whether
        the KB is gone."""
        deadline = min(deadline, hook_deadline())
        self.keys_swept = False  # then each later run lists the keys once more, the marker kept
        try:
            while not self.done and not self.keys_swept and time.monotonic() < deadline:
                await self.step(host, deadline)
        except BudgetSpent:
            pass  # the step is repeated by a later run
        return self.done

    async def recheck_vectors(self, host: HostApi, deadline: float) -> None:
        """List the KB's vectors once more and delete what is found, within the hook (the only
        time they can be reached): a call of the previous process may land meanwhile, as LangBot
        does not cancel a dead plugin's calls."""
        self.tried.clear()
        self.bulk, self.position, self.vectors_done = True, len(self.known), False
        try:
            while not self.vectors_done and time.monotonic() < min(deadline, hook_deadline()):
                await self._vector_step(host)
        except Exception as error:  # noqa: BLE001 - the KB is gone either way; logged for the operator
            logger.warning("kb=%s: the vectors could not be looked for once more (%s)", self.kb_id, describe(error))
        self.vectors_done = True

    async def step(self, host: HostApi, deadline: float) -> None:
        if not self.vectors_done:
            try:
                await self._vector_step(host)
            except Exception as error:  # noqa: BLE001 - classified: a KB LangBot already dropped
                if not is_kb_gone(error):
                    raise
                logger.warning("kb=%s: LangBot has removed the knowledge base, so the vectors it may "
                               "still hold can no longer be reached; removing LucidRAG's own data", self.kb_id)
                self.vectors_done = True
            return
        late = storage_writes_may_land(self.kb_id)
        if not await KbStore(host, self.kb_id).delete_everything(deadline, keep_marker=late):
            return  # plugin-storage keys left (budget, or storage failed): the next run continues
        if late:
            self.keys_swept = True
            return
        self.done = True
        logger.info("kb=%s: knowledge base removed (%d files, %.1f s)", self.kb_id, self.deleted,
                    time.monotonic() - self.started)

    async def _vector_step(self, host: HostApi) -> None:
        if self.bulk is None:
            try:
                await with_retries(lambda: host.vector_delete(self.kb_id, filters=ALL_VECTORS))
                self.bulk = True
            except BudgetSpent:
                raise  # no answer in time says nothing about the backend
            except Exception as error:  # noqa: BLE001 - the file-by-file passes catch what is left
                if is_kb_gone(error):
                    raise
                self.bulk = False
                logger.info("kb=%s: deleting every vector at once failed (%s); deleting file by file",
                            self.kb_id, describe(error))
            return
        if not self.bulk and self.position < len(self.known):
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
        if self.bulk:
            self.deleted = max(self.deleted, len(self.known))
        self.vectors_done = True

    async def _delete_known_batch(self, host: HostApi) -> None:
        batch = self.known[self.position : self.position + FILTER_DELETE_BATCH]
        where = {"file_id": batch[0]} if len(batch) == 1 else {"file_id": {"$in": batch}}
        try:
            await with_retries(lambda: host.vector_delete(self.kb_id, filters=where))
        except BudgetSpent:
            raise  # the batch is tried again
        except Exception as error:  # noqa: BLE001 - the listing pass catches what is left
            logger.info("kb=%s: filter delete failed (%s); the listing pass deletes by file id", self.kb_id,
                        describe(error))
        self.position += len(batch)
        self.deleted += len(batch)
