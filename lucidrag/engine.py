"""The engine's entry points, one per host hook, over per-installation state.

A shared runtime serves many installations from one object graph, so nothing tenant-specific
lives in a module global: `Engine` holds one `Installation` per installation id, and each of those
holds per-KB state. The component passes the host API and the installation id with every call.

No work outlives the hook that started it (the SDK refuses host calls after an invocation ended).
Unfinished work -- a KB deletion past its hook's budget, storage writes that failed, ingests a
crash interrupted -- is kept as state and continued in bounded slices by later hooks (`_upkeep`).

Every hook but ingest runs its host calls within LangBot's timeout for it (base/budget.py): a call
that would end past the hook's deadline is abandoned, and what it was for waits as state. A KB
whose snapshot could not be loaded in time stays unloaded (the hook fails, and the next loads it).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import numpy as np

from lucidrag.base.alongside import beside, hook_scope
from lucidrag.base.bookkeeping import BookkeepingFailures, storable
from lucidrag.base.budget import IngestDeadlines, bounded, budget, hook_budget, remaining
from lucidrag.base.errors import LucidRagError, PluginStorageFailure, VectorStoreFailure
from lucidrag.base.host import HostApi, describe, is_kb_gone
from lucidrag.base.settings import RetrievalSettings, parse_creation_settings, parse_retrieval_settings
from lucidrag.index.probes import ALL_PROBES, language
from lucidrag.ingestion.ingest import IngestOutcome, IngestRequest, ingest_file
from lucidrag.retrieval.filters import normalise_filters
from lucidrag.retrieval.retrieve import Hit, RetrieveRequest, retrieve
from lucidrag.state.kbdelete import KbDeletion
from lucidrag.state.latewrites import (
    PREVIOUS_PROCESS_LANDING_S,
    UnansweredStorageWrites,
    noting_unanswered_writes,
    delete_file_vectors,
    storage_writes_may_land,
)
from lucidrag.state.journals import remove_first_write
from lucidrag.state.kbstate import KnowledgeBaseState
from lucidrag.state.metastate import Mark
from lucidrag.state.probestats import ProbeStats, maxima_of
from lucidrag.state.querylog import NAME_CHARS, QUESTION_CHARS, TOP_FILES, QueryEntry, QueryLog, question_digest
from lucidrag.state.storage_keys import kb_ids, probe_stats_key
from lucidrag.state.store import KbMeta, KbStore, KeySnapshot, list_keys
from lucidrag.vectors.embedding import BatchSize, Embedder, VectorCache

logger = logging.getLogger(__name__)

KB_DELETE_BUDGET_S = 20.0  # of on_knowledge_base_delete's 30 s (HOOK_TIMEOUT_S)
KB_DELETE_STORAGE_SHARE = 0.25  # of that hook's time, at most, for plugin storage before the vectors
KB_DELETE_DRAIN_SHARE = 0.25  # of that hook's time, at most, waiting for an upload's writes under way
# Time each hook may spend starting unfinished work before its own (retrieve is what users wait
# for), and how much longer a step started in it may take (a listing of 50,000 keys, one segment).
UPKEEP_BUDGET_S = {"ingest": 10.0, "retrieve": 1.0, "delete": 5.0, "create": 5.0, "kb_delete": 5.0}
UPKEEP_STEP_SLACK_S = 10.0
# How long a hybrid query waits for a keyword index still being read after a restart (see
# retrieve): the reading gets that much of every such query's time; the first answer stays < 3 s.
QUERY_LOAD_WAIT_S = 1.0
KEYWORD_WAIT_S = 10.0


class _ClosedWithItsKb(Protocol):
    closed: bool  # its KB was deleted: nothing more is written


Closable = TypeVar("Closable", bound=_ClosedWithItsKb)


@dataclass
class Installation:
    cache: VectorCache = field(default_factory=VectorCache)
    batch_sizes: dict[str, BatchSize] = field(default_factory=dict)
    kbs: dict[str, KnowledgeBaseState] = field(default_factory=dict)
    deletions: dict[str, KbDeletion] = field(default_factory=dict)  # KB deletions not finished yet
    discovered: bool = False  # unfinished work of an earlier process looked for
    snapshot: KeySnapshot | None = None  # the storage listing made then, which new KB states start from
    settings_saved: set[str] = field(default_factory=set)  # KBs whose creation settings this process saved
    query_logs: dict[str, QueryLog] = field(default_factory=dict)  # the console's recent questions per KB
    deleted_kbs: set[str] = field(default_factory=set)  # KBs deleted in this process: no log is kept for them
    bookkeeping: BookkeepingFailures = field(default_factory=BookkeepingFailures)  # errors of the query logs
    unanswered_writes: UnansweredStorageWrites = field(default_factory=UnansweredStorageWrites)
    previous_writes_until: float = 0.0  # a host call of the previous process may land until then
    foreign_kbs: dict[str, float] = field(default_factory=dict)  # KBs the agent tools found not ours: until when
    probe_stats: dict[str, ProbeStats] = field(default_factory=dict)  # the relevance cut's, per KB
    probe_vectors: dict[str, np.ndarray] = field(default_factory=dict)  # the probes embedded, per model

    def _kb_owned(self, table: dict[str, Closable], kb_id: str, make: Callable[[], Closable]) -> Closable:
        """`table`'s entry for the KB, made if missing. One made for a KB deleted in this process (a
        question answered, an upload committed while it was deleted) is closed and not kept."""
        item = table.get(kb_id)
        if item is None:
            item = make()
            if kb_id in self.deleted_kbs:
                item.closed = True
            else:
                table[kb_id] = item
        return item

    def query_log(self, kb_id: str) -> QueryLog:
        return self._kb_owned(self.query_logs, kb_id, lambda: QueryLog(kb_id))

    def kb_probe_stats(self, kb_id: str) -> ProbeStats:
        def make() -> ProbeStats:
            stats = ProbeStats(kb_id)
            # the process's storage listing shows whether there is anything to read
            stats.read = self.snapshot is not None and probe_stats_key(kb_id) not in self.snapshot.keys
            return stats
        return self._kb_owned(self.probe_stats, kb_id, make)

    def kb(self, kb_id: str) -> KnowledgeBaseState:
        state = self.kbs.get(kb_id)
        if state is None:
            state = self.kbs[kb_id] = KnowledgeBaseState(
                kb_id, previous_writes_until=self.previous_writes_until, probe_look_at=self.previous_writes_until)
            if self.snapshot is not None:
                state.seed(self.snapshot)
        return state


P = ParamSpec("P")
R = TypeVar("R")


def _in_hook_scope(hook: Callable[Concatenate[Engine, HostApi, str, P], Awaitable[R]]
                   ) -> Callable[Concatenate[Engine, HostApi, str, P], Awaitable[R]]:
    """What a hook starts beside its own work (reading a KB's index snapshot, saving the query
    logs) ends before it returns (base/alongside.py); its plugin-storage writes given up on are
    the installation's to know of."""
    @functools.wraps(hook)
    async def run(self: Engine, host: HostApi, installation_id: str, *args: P.args, **kwargs: P.kwargs) -> R:
        inst = self.installation(installation_id)
        with noting_unanswered_writes(inst.unanswered_writes):
            async with hook_scope():
                with inst.bookkeeping.guard("saving the query logs"):
                    self._save_query_logs_beside(host, inst, eager=hook.__name__ != "retrieve")
                return await hook(self, host, installation_id, *args, **kwargs)
    return run


class Engine:
    def __init__(self) -> None:
        self.installations: dict[str, Installation] = {}
        self.started = time.monotonic()

    def installation(self, installation_id: str) -> Installation:
        inst = self.installations.get(installation_id)
        if inst is None:
            inst = self.installations[installation_id] = Installation(
                previous_writes_until=self.started + PREVIOUS_PROCESS_LANDING_S)
        return inst

    def revoke(self, installation_id: str) -> None:
        self.installations.pop(installation_id, None)

    # ------------------------------------------------------------------ hooks
    @_in_hook_scope
    async def create_knowledge_base(self, host: HostApi, installation_id: str, kb_id: str) -> None:
        """Remember that the new KB has no vectors yet, so that nothing touches the vector DB before
        its first upsert (see KnowledgeBaseState.fresh): in this process whatever storage does, in
        plugin storage as soon as it takes the mark (upkeep retries it)."""
        inst = self.installation(installation_id)
        state = inst.kb(kb_id)
        state.created()
        with hook_budget("create"):
            # (a listing made before would say the meta is absent)
            state.meta.stored_at_creation(await KbStore(host, kb_id).save_meta(KbMeta(None, False)))
            await self._upkeep(host, inst, "create")

    @_in_hook_scope
    async def ingest(self, host: HostApi, installation_id: str, request: IngestRequest,
                     deadlines: IngestDeadlines) -> IngestOutcome:
        """Ingest one file (ingestion/ingest.py: its outcome, within `deadlines`)."""
        inst = self.installation(installation_id)
        state = inst.kb(request.kb_id)

        embedder = Embedder(host, inst.cache, inst.batch_sizes)
        model = request.settings.embedding_model_uuid

        async def ready() -> None:
            await state.ensure_loaded(host, request.collection_id, index_now=False)
            await self._upkeep(host, inst, "ingest")

        def committed(vectors: np.ndarray, probe_vectors: np.ndarray | None, opening: np.ndarray | None) -> None:
            with inst.bookkeeping.guard("the relevance cut's probe statistics"):
                if probe_vectors is not None:
                    inst.probe_vectors.setdefault(model, probe_vectors)
                stats = inst.kb_probe_stats(request.kb_id)
                openings = stats.live.observe(model, request.document_id, vectors, opening)
                probes = inst.probe_vectors.get(model)
                if probes is not None:
                    stats.observe(maxima_of(model, vectors, probes, openings))
        # the probes ride in the file's embedding batches until one upload per model has committed,
        # the file's opening question while the KB has room for one (state/openingstats.py)
        probes = () if model in inst.probe_vectors else ALL_PROBES
        known = inst.probe_stats.get(request.kb_id)
        return await ingest_file(host, state, embedder, request, deadlines, ready, probes,
                                 known is None or known.live.wants(model), committed)

    @_in_hook_scope
    async def retrieve(self, host: HostApi, installation_id: str, kb_id: str, collection_id: str,
                       query: str, creation_settings: Mapping[str, Any],
                       retrieval_settings: Mapping[str, Any], filters: Mapping[str, Any] | None,
                       log: bool = True) -> list[Hit]:
        """The hits for `query`. With `log` (a user's question, not the console's), the question
        is recorded in the KB's query log as the retrieval setting `query_log` says; whatever
        fails there is counted in `Installation.bookkeeping`, never raised."""
        started = time.monotonic()
        settings = parse_retrieval_settings(retrieval_settings)
        inst = self.installation(installation_id)
        try:
            hits = await self._retrieve(host, inst, kb_id, collection_id, query, creation_settings, settings, filters)
        except LucidRagError as error:
            if log:
                with inst.bookkeeping.guard("the query log"):
                    _log_query(inst, kb_id, query, settings, started, [], str(error))
            raise
        if log:
            with inst.bookkeeping.guard("the query log"):
                _log_query(inst, kb_id, query, settings, started, hits)
        return hits

    async def _retrieve(self, host: HostApi, inst: Installation, kb_id: str, collection_id: str, query: str,
                        creation_settings: Mapping[str, Any], settings: RetrievalSettings,
                        filters: Mapping[str, Any] | None) -> list[Hit]:
        creation = parse_creation_settings(creation_settings)
        where = normalise_filters(filters)
        state = inst.kb(kb_id)
        with hook_budget("retrieve"):
            # After a restart the KB's queries read its keyword index beside their own work.
            # Meanwhile a hybrid query waits for it up to QUERY_LOAD_WAIT_S and is then answered by
            # its vector half, a keyword query waits up to KEYWORD_WAIT_S (then it is answered by
            # vector search), a vector query does not wait, and a filter, evaluated over the
            # index's files, waits for it.
            wait_s = (math.inf if where else {"keyword": KEYWORD_WAIT_S, "hybrid": QUERY_LOAD_WAIT_S}
                      .get(settings.search_mode, 0.0))
            await state.ensure_loaded(host, collection_id, wait_s=wait_s)
            if state.fresh and not state.never_had_vectors and await self._open_collection(
                    host, inst, state, collection_id, creation.embedding_model_uuid, query):
                await state.ensure_loaded(host, collection_id, wait_s=wait_s)  # its files are looked for now
            await self._upkeep(host, inst, "retrieve", first=state)
            if state.fresh and not state.has_files():
                return []  # no vector yet: a search would make Milvus create a wrong-dimension collection
            embedder = Embedder(host, inst.cache, inst.batch_sizes)
            background = None
            if settings.relevance_cut == "auto":
                with inst.bookkeeping.guard("reading the relevance cut's probe statistics"):
                    background = await inst.kb_probe_stats(kb_id).background(
                        host, creation.embedding_model_uuid, language(query), len(state.index))
            request = RetrieveRequest(kb_id, collection_id, query, creation, settings, where,
                                      background.probes if background else None,
                                      background.anchor if background else None)
            return await retrieve(host, state, embedder, request)

    @_in_hook_scope
    async def read_kb(self, host: HostApi, installation_id: str, kb_id: str,
                      read: Callable[[KnowledgeBaseState], Awaitable[R]]) -> R:
        """`read(state)` once the KB's state is loaded: the agent tools' reads (file lists, the
        passages around one), which change nothing but caches."""
        state = self.installation(installation_id).kb(kb_id)
        await state.ensure_loaded(host, kb_id)  # collection id = KB uuid
        return await read(state)

    async def _open_collection(self, host: HostApi, inst: Installation, state: KnowledgeBaseState,
                               collection_id: str, model: str, query: str) -> bool:
        """`KnowledgeBaseState.open_collection` with the model's dimension, learnt from the query."""
        try:
            dim = len(await Embedder(host, inst.cache, inst.batch_sizes).embed_query(model, query))
        except Exception as error:  # noqa: BLE001 - then the query is answered as from an empty KB
            logger.warning("kb=%s: the embedding model did not answer (%s)", state.kb_id, describe(error))
            return False
        return await state.open_collection(host, collection_id, dim)

    @_in_hook_scope
    async def delete_document(self, host: HostApi, installation_id: str, kb_id: str, document_id: str) -> None:
        """Remove every vector and record of one file. Raises VectorStoreFailure if the host failed
        (or did not answer in time: LangBot then keeps the file, and deleting it again is safe), and
        PluginStorageFailure if the file's record could not be removed in the hook's time, nor its
        journal entry rewritten to make a restart remove it: True only once the deletion survives
        a restart. Index writes that do not fit are retried by later hooks."""
        inst = self.installation(installation_id)
        state = inst.kb(kb_id)
        with hook_budget("delete"):
            await state.ensure_loaded(host, kb_id, index_now=False)
            store = KbStore(host, kb_id)
            if state.fresh and not state.never_had_vectors:
                # Whether the collection exists is unknown (the meta is unread, or storage holds
                # nothing of the KB): a delete could make Milvus create it, skipping it could leave
                # the file's vectors behind. They go once a query has opened the collection.
                if not await state.delete_file_later(store, document_id):
                    raise PluginStorageFailure("LangBot's plugin storage could not be read, so the file "
                                               "could not be deleted safely; delete the file again")
                logger.info("kb=%s doc=%s: deleted (its vectors, if any, once the collection is opened)",
                            kb_id, document_id)
                await self._upkeep(host, inst, "delete")
                return

            # A KB that never had a vector has none to delete (and Milvus would create the
            # collection), unless a first write of this file had an unknown outcome.
            first_write = (state.first_write_remover(host, store, kb_id, document_id)
                           if state.never_had_vectors else None)

            async def delete_vectors() -> None:
                try:
                    if first_write is not None:
                        await first_write()
                    else:
                        await delete_file_vectors(host, state.files, kb_id, [document_id])
                except Exception as error:  # noqa: BLE001
                    raise VectorStoreFailure(
                        f"The vector database did not delete the file: {describe(error)}") from error

            deletion = await state.delete_file(store, document_id, delete_vectors)
            if not deletion.durable:
                landing_s = deletion.writes_land_until - time.monotonic()
                if landing_s > 0:
                    raise PluginStorageFailure(
                        "LangBot's plugin storage refused to note the deletion, and LangBot may still write vectors "
                        f"of this file that it did not confirm (for up to {math.ceil(landing_s)} s): nothing was "
                        "deleted; delete the file again after that")
                # True now would let the file come back after a restart (its record is still stored)
                raise PluginStorageFailure("LangBot's plugin storage did not remove the file's record (or could "
                                           "not be read); delete the file again")
            logger.info("kb=%s doc=%s: deleted", kb_id, document_id)
            await self._upkeep(host, inst, "delete")

    @_in_hook_scope
    async def delete_knowledge_base(self, host: HostApi, installation_id: str, kb_id: str) -> bool:
        """Remove every vector of the KB (the host leaves them behind) and all derived state.

        Known files go with one backend call per 500 (`file_id $in` filter); then whatever the
        vector DB still lists is deleted by file id until the listing is empty. What is left when
        the budget runs out is continued by the installation's next hooks; a marker in plugin
        storage lets a restarted plugin finish it. Returns whether the KB is gone already."""
        with hook_budget("kb_delete"):
            return await self._delete_knowledge_base(host, installation_id, kb_id)

    async def _delete_knowledge_base(self, host: HostApi, installation_id: str, kb_id: str) -> bool:
        inst = self.installation(installation_id)
        store = KbStore(host, kb_id)
        # What an upload or the query log is writing now lands before the listings below, so that
        # they find it; nothing more is written for the KB.
        state = await self._retire_kb(inst, kb_id, remaining() * KB_DELETE_DRAIN_SHARE)
        # The vectors can only be deleted in this hook: slow plugin storage must not take its time.
        with budget(remaining() * KB_DELETE_STORAGE_SHARE):
            # first: a restart finishes what this hook does not (LangBot refuses the KB's vector
            # calls by then, so that finishes with its keys)
            await store.mark_delete_pending()
            snapshot = await list_keys(host)
            file_ids = set(snapshot.record_ids(kb_id) if snapshot else [])
            if state is not None:
                file_ids.update(state.known_files())
            meta = await store.load_meta()
            # The stored mark, or (not stored: the write at creation failed) this process's
            # knowledge, says the KB never had a vector. Where nothing says either, the vectors are
            # looked for: an empty collection is what LangBot keeps of every deleted KB anyway.
            mark = meta.has_vectors if meta is not None else (state.meta.has_vectors if state is not None else None)
            never_written = (not file_ids and mark is False
                             and (state is None or state.meta.has_vectors is not True))
            # ... but a first write whose outcome is unknown (its answer lost) may have left vectors
            first_writes: dict[str, int] = {}
            try:
                first_writes = await _first_writes(store, state, snapshot) if never_written else {}
            except Exception as error:  # noqa: BLE001 - then as a KB with vectors: the listing finds them
                logger.warning("kb=%s: an ingest journal could not be read (%s)", kb_id, describe(error))
                never_written = False
        if never_written:  # listing would make Milvus create a collection for a deleted KB
            try:
                for file_id, dim in first_writes.items():
                    await remove_first_write(host, kb_id, file_id, dim)
            except Exception as error:  # noqa: BLE001 - then as a KB with vectors
                logger.warning("kb=%s: a failed first write could not be removed (%s)", kb_id, describe(error))
                file_ids.update(first_writes)
            else:
                late = storage_writes_may_land(kb_id)
                if await store.delete_everything(keep_marker=late) and not late:
                    return True
                # keys left (storage failed), or a write given up on may still land: later hooks
                # delete them, without touching the vectors
                inst.deletions.setdefault(kb_id, KbDeletion(kb_id, [])).vectors_done = True
                return False
        job = inst.deletions.setdefault(kb_id, KbDeletion(kb_id, sorted(file_ids)))
        done = await job.run(host, time.monotonic() + KB_DELETE_BUDGET_S)
        if job.vectors_done and time.monotonic() < inst.previous_writes_until:
            # an upload of the previous process may still land: what landed since is removed now
            await job.recheck_vectors(host, time.monotonic() + KB_DELETE_BUDGET_S)
        if done:
            inst.deletions.pop(kb_id, None)
        else:
            logger.warning("kb=%s: knowledge base deletion continues with the next requests (%d files so far)",
                           kb_id, job.deleted)
        return done

    # ------------------------------------------------------------------ query logs
    def _save_query_logs_beside(self, host: HostApi, inst: Installation, eager: bool) -> None:
        """Write the query logs that are due (`QueryLog.due`), beside the hook and never waited
        for: a write cut short when the hook ends is made again by a later hook."""
        if any(log.due(eager) for log in inst.query_logs.values()):
            beside("query-logs", lambda: _save_query_logs(host, inst, eager), drain=False)

    # ------------------------------------------------------------------ unfinished work
    async def _upkeep(self, host: HostApi, inst: Installation, hook: str,
                      first: KnowledgeBaseState | None = None) -> None:
        """Continue unfinished work for at most the hook's budget. Never raises."""
        with budget(UPKEEP_BUDGET_S[hook] + UPKEEP_STEP_SLACK_S) as calls_end:
            # no step starts once no host call may run any more (the hook's own deadline)
            await self._continue_unfinished(host, inst, min(time.monotonic() + UPKEEP_BUDGET_S[hook], calls_end),
                                            hook, first)

    async def _continue_unfinished(self, host: HostApi, inst: Installation, deadline: float, hook: str,
                                   first: KnowledgeBaseState | None) -> None:
        """One KB's failure never stops another's work (each is caught and logged here)."""
        if not inst.discovered:
            try:
                await self._discover(host, inst)
            except Exception as error:  # noqa: BLE001 - unfinished work must never fail the hook itself
                logger.warning("unfinished work could not be looked for now (%s); will retry", describe(error))
        for kb_id, job in list(inst.deletions.items()):
            if time.monotonic() >= deadline:
                return
            try:
                if await job.run(host, deadline):
                    inst.deletions.pop(kb_id, None)
            except Exception as error:  # noqa: BLE001
                logger.warning("kb=%s: the knowledge base's deletion could not continue now (%s); will retry",
                               kb_id, describe(error))
        states = [first] if first is not None else []
        states += [s for s in inst.kbs.values() if s is not first]
        # Every KB's meta still to be written goes before any KB's other work: until it is stored,
        # a stored "never had a vector" keeps every later process from the vectors (tombstones,
        # sweep notes) this one left there, should it die meanwhile (seed 4416).
        meta_tried: set[str] = set()
        for state in states:
            if time.monotonic() >= deadline:
                return
            if state.meta.dirty and not state.lock.locked():
                meta_tried.add(state.kb_id)
                try:
                    await state.save_meta_due(host, deadline)
                except Exception as error:  # noqa: BLE001
                    logger.warning("kb=%s: the knowledge base's meta could not be saved now (%s); will retry",
                                   state.kb_id, describe(error))
        for state in states:
            if time.monotonic() >= deadline:
                return
            # Never behind another hook's change of a KB (a long commit on slow storage): later.
            if not state.needs_upkeep() or state.lock.locked():
                continue
            # A query indexes only its own KB: another KB's files the index lacks after a restart
            # (up to a few thousand chunks) would cost this query up to its budget.
            index = hook != "retrieve" or state is first
            try:
                await state.upkeep(host, state.kb_id, deadline, index=index,  # collection id = KB uuid
                                   save_meta=state.kb_id not in meta_tried)
            except Exception as error:  # noqa: BLE001
                if is_kb_gone(error):
                    await self._forget_removed_kb(inst, state.kb_id)
                else:
                    logger.warning("kb=%s: unfinished work could not continue now (%s); will retry",
                                   state.kb_id, describe(error))
        # (a question writes nothing: its hook's host calls stay those of answering it)
        for stats in [s for s in inst.probe_stats.values() if s.dirty and hook != "retrieve"]:
            if time.monotonic() >= deadline:
                return
            with inst.bookkeeping.guard("saving the relevance cut's probe statistics"):
                await stats.save(host)

    async def _forget_removed_kb(self, inst: Installation, kb_id: str) -> None:
        """LangBot refuses the KB's vector calls: it was deleted (say, while this plugin was down,
        leaving a journal entry). LucidRAG's own data of it goes as after its deletion hook."""
        logger.warning("kb=%s: LangBot has removed this knowledge base; removing LucidRAG's data of it", kb_id)
        await self._retire_kb(inst, kb_id, 0.0)
        inst.deletions.setdefault(kb_id, KbDeletion(kb_id, []))

    @staticmethod
    async def _retire_kb(inst: Installation, kb_id: str, drain_s: float) -> KnowledgeBaseState | None:
        """The KB is gone: its state leaves the installation, and neither its uploads nor its query
        log write anything from now on; the writes under way are waited for up to `drain_s`.
        Returns the state it had, if any."""
        state = inst.kbs.pop(kb_id, None)
        inst.cache.drop_kb(kb_id)
        inst.deleted_kbs.add(kb_id)
        log = inst.query_logs.pop(kb_id, None)
        stats = inst.probe_stats.pop(kb_id, None)
        closing = []
        if state is not None:
            closing.append(state.writes.close(drain_s))
        if log is not None:
            closing.append(log.close(drain_s))
        if stats is not None:
            closing.append(stats.close(drain_s))
        if not all(await asyncio.gather(*closing)):
            logger.warning("kb=%s: a write under way did not finish before the knowledge base's deletion", kb_id)
        return state

    async def _discover(self, host: HostApi, inst: Installation) -> None:
        """Once per process: KB deletions and ingests an earlier process left unfinished."""
        snapshot = await list_keys(host)
        if snapshot is None:
            return
        inst.discovered, inst.snapshot = True, snapshot
        for kb_id in snapshot.pending_kb_deletes():
            if kb_id not in inst.deletions:
                logger.info("kb=%s: resuming an unfinished knowledge base deletion", kb_id)
                inst.deletions[kb_id] = KbDeletion(kb_id, [])
        for kb_id in await _kbs_langbot_dropped(host, inst, snapshot):
            logger.info("kb=%s: LangBot no longer lists this knowledge base; removing LucidRAG's data of it", kb_id)
            job = inst.deletions[kb_id] = KbDeletion(kb_id, [])
            job.vectors_done = True  # LangBot refuses every vector call for a KB it dropped
        for kb_id in snapshot.kbs_with_journals():
            if kb_id not in inst.deletions:
                state = inst.kb(kb_id)
                state.seed(snapshot)
                if state.meta.mark is Mark.UNKNOWN:
                    meta = await KbStore(host, kb_id).load_meta()
                    state.meta.learnt(meta.has_vectors if meta else None)


async def _kbs_langbot_dropped(host: HostApi, inst: Installation, snapshot: KeySnapshot) -> list[str]:
    """KBs this installation's storage holds keys of that LangBot no longer lists: deleted while
    their deletion could leave nothing durable (plugin storage refused its marker, and the process
    ended before the keys were gone)."""
    try:
        listed = {str(kb["uuid"]) for kb in await bounded(host.list_knowledge_bases)}  # type: ignore[attr-defined]
    except Exception as error:  # noqa: BLE001 - a host without the call, or a failed call: next process
        logger.info("could not list LangBot's knowledge bases (%s)", describe(error))
        return []
    if not listed:
        return []  # an empty answer is never taken as "every knowledge base was deleted"
    return [kb_id for kb_id in kb_ids(list(snapshot.keys))
            if kb_id not in listed and kb_id not in inst.deletions and kb_id not in inst.kbs]


def _log_query(inst: Installation, kb_id: str, query: str, settings: RetrievalSettings, started: float,
               hits: list[Hit], error: str = "") -> None:
    if settings.query_log == "off":
        return
    files: dict[str, tuple[str, str, float]] = {}
    for hit in hits:
        file_id = hit.chunk.file_id
        if file_id not in files and len(files) < TOP_FILES:
            files[file_id] = (storable(file_id), storable(hit.document_name)[:NAME_CHARS], hit.score)
    question = storable(query)
    entry = QueryEntry(at=time.time(), question=question[:QUESTION_CHARS] if settings.query_log == "text" else "",
                       digest=question_digest(kb_id, question), mode=settings.search_mode,
                       latency_ms=(time.monotonic() - started) * 1000.0, top_k=settings.top_k,
                       results=len(hits), files=tuple(files.values()), error=storable(error)[:QUESTION_CHARS])
    inst.query_log(kb_id).record(entry, settings.query_log_size)


async def _save_query_logs(host: HostApi, inst: Installation, eager: bool) -> None:
    """Once this process knows which blocks storage holds (the listing made at its first hook)."""
    for kb_id, log in list(inst.query_logs.items()):
        with inst.bookkeeping.guard("saving the query log"):
            if inst.snapshot is not None and log.due(eager):
                await log.save(host, inst.snapshot.query_log_blocks(kb_id), eager=eager)


async def _first_writes(store: KbStore, state: KnowledgeBaseState | None,
                        snapshot: KeySnapshot | None) -> dict[str, int]:
    """The journalled files of a KB that never had a vector whose write may have left vectors
    (file id -> their dimension; `KnowledgeBaseState.first_write_of`)."""
    journalled = set(snapshot.journal_ids(store.kb_id) if snapshot else []) | (state.journals if state else set())
    out: dict[str, int] = {}
    for file_id in sorted(journalled):
        dim = state.files.first_write_dim(file_id) if state is not None else None
        if dim is None:
            entry = await store.read_journal(file_id, strict=True)
            dim = entry.dim if entry is not None else None
        if dim is not None:
            out[file_id] = dim
    return out
