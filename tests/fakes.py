"""A fake LangBot host that behaves like ../shared/HOST_CONTRACT.md says the real one does.

Method signatures are copied from langbot_plugin/api/proxies/langbot_api.py. Behaviour copied
from the contract: squared-L2 distances (Chroma), `vector_delete` matches metadata `file_id` only
and returns len(file_ids), nested metadata is rejected, a collection's dimension is fixed by its
first upsert, `vector_list` pages, host-added `_langbot_*` keys, plugin storage per key. Every
call is counted; faults can be injected per method.

As harsh as the real runtime (SDK 0.7.18): every call yields to the event loop (plus an
optional `latency`), and a call made after the plugin invocation that issued it has ended is
refused with RuntimeError('Plugin invocation has ended'), exactly like the SDK's
`invocation_capability(handler).require_active()` in `Handler.call_action` (checked before the
request and again when the answer arrives). Provider and transport misbehaviour on demand:
`embed_scale` (vectors that are not unit length, like Ollama/TEI), `max_embed_batch` with
`batch_error` (how "batch too large" reaches the plugin), `burst()` (429/503 runs), and
`disconnect()` (LangBot restarted: the SDK's ConnectionClosedError or, once the runtime handler is
gone, AttributeError "'NoneType' object has no attribute 'call_action'"). Error texts are those the
plugin really receives: LangBot 4.11.2 wraps provider errors as "[EmbeddingError/RequesterError]
[embedding_model_uuid=…] Model request failed: <summary>" and drops the status code
(pkg/plugin/handler.py, pkg/provider/modelmgr/requesters/litellmchat.py).

`LoopStallMonitor` measures the longest time the event loop did not run a scheduled callback.

Plugin storage is per installation, as LangBot keeps it (owner = the calling installation): calls
made under an `InstallationBinding` use that installation's storage (`installation_storage`),
calls without one the dedicated installation's (`storage`).

`QueryScopedActions` answers the actions a Tool reaches through the SDK's `call_action` for the
query it was called in, as LangBot 4.11.2 does (pkg/plugin/handler.py):
LIST_PIPELINE_KNOWLEDGE_BASES and RETRIEVE_KNOWLEDGE_BASE without a run id. What it leaves out is
listed in docs/TESTING.md.

`FakeHost.milvus()` behaves like LangBot's Milvus adapter (pkg/vector/vdbs/milvus.py): COSINE
similarity as `distance`, only text / file_id / uuid (as chunk_uuid) kept, an insert without
`uuid` refused, filters on other fields and `$and`/`$or` silently dropped (filter_utils.
strip_unsupported_fields), a search/delete/list on a missing collection creates it with the
default dimension 1536, and `vector_list` refuses offset + limit > 16384 (Milvus' query window).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import itertools
import math
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from langbot_plugin.api.entities.builtin.rag.context import RetrievalContext, RetrievalResponse
from langbot_plugin.api.entities.builtin.rag.models import FileMetadata, FileObject, IngestionContext
from langbot_plugin.api.proxies.invocation import current_binding, invocation_capability
from langbot_plugin.entities.io.actions.enums import PluginToRuntimeAction
from langbot_plugin.entities.io.errors import (
    ActionCallError,
    ActionCallTimeoutError,
    ConnectionClosedError,
)

from lucidrag.retrieval.filters import matches

__all__ = ["ActionCallTimeoutError", "ConnectionClosedError", "FakeHost", "HostError", "LoopStallMonitor",
           "QueryScopedActions", "hash_embed"]

DIM = 64
DEFAULT_WORKSPACE = "workspace-1"  # the workspace of calls made without an installation binding


@functools.lru_cache(maxsize=65536)
def _gram_slot(gram: str, dim: int) -> tuple[int, float]:
    h = int(hashlib.md5(gram.encode()).hexdigest(), 16)
    return h % dim, 1.0 if (h >> 8) % 2 else -1.0


def hash_embed(text: str, dim: int = DIM) -> list[float]:
    """Deterministic bag-of-ngrams embedding: texts sharing words/CJK bigrams are close."""
    vector = [0.0] * dim
    lowered = text.lower()
    grams = re.findall(r"[a-z0-9]+", lowered)
    cjk = re.findall(r"[\u4e00-\u9fff]", lowered)
    grams += ["".join(p) for p in zip(cjk, cjk[1:])]
    for gram in grams or [lowered or " "]:
        slot, sign = _gram_slot(gram, dim)
        vector[slot] += sign
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def on_call(n: int) -> Callable[..., bool]:
    """A `FakeHost.fail` condition that holds for the n-th call (from 1) of the method only."""
    calls = itertools.count(1)
    return lambda **_: next(calls) == n


class HostError(ActionCallError):
    """What the SDK raises for an action the host answered with an error (ActionCallError)."""


def langbot_embedding_error(model: str, summary: str) -> HostError:
    """An embedding failure as LangBot 4.11.2 reports it (`_make_rag_error_response`)."""
    return HostError(f"[EmbeddingError/RequesterError] [embedding_model_uuid={model}] Model request failed: {summary}")


# How a "batch too large" refusal reaches the plugin. Through LangBot 4.11.2 (litellm, observed with
# its venv against a local server): an OpenAI-style 400 → "Invalid request parameters" (`langbot`),
# TEI's 413 → a bare litellm APIError → "API error" (`langbot-413`); status and provider text are
# dropped. The others are raw provider texts, as hosts that pass them through show them.
BATCH_ERRORS: dict[str, Callable[[str, int, int], HostError]] = {
    "langbot": lambda model, n, cap: langbot_embedding_error(model, "Invalid request parameters"),
    "langbot-413": lambda model, n, cap: langbot_embedding_error(model, "API error"),
    "openai": lambda model, n, cap: HostError(
        f"[EmbeddingError/BadRequestError] [embedding_model_uuid={model}] Error code: 400 - {{'error': "
        f"{{'message': 'Too many inputs: {n}. The maximum number of inputs is {cap}.', "
        f"'type': 'invalid_request_error'}}}}"),
    "tei": lambda model, n, cap: HostError(
        f"[EmbeddingError/APIStatusError] [embedding_model_uuid={model}] Error code: 413 - {{'error': "
        f"'batch size {n} > maximum allowed batch size {cap}', 'error_type': 'Validation'}}"),
    "dashscope": lambda model, n, cap: HostError(
        f"[EmbeddingError/BadRequestError] [embedding_model_uuid={model}] Error code: 400 - {{'error': "
        f"{{'code': 'InvalidParameter', 'message': '<400> InternalError.Algo.InvalidParameter: Value "
        f"error, batch size is invalid, it should not be larger than {cap}.: input.contents'}}}}"),
}

# A burst of provider failures, as LangBot 4.11.2 reports them (litellm RateLimitError; 500/502/503
# are InternalServerError/BadGatewayError/ServiceUnavailableError, all "Unknown error" to LangBot).
BURST_ERRORS: dict[str, str] = {
    "429": "Rate limit exceeded or insufficient balance",
    "500": "Unknown error",
    "503": "Unknown error",
    "timeout": "Request timed out",
    "connection": "Connection failed",
}


class RuntimeHandler:
    """Stands in for the SDK's runtime handler: the object invocations are bound to, and whose
    `call_action` reaches the host's query-scoped actions (`FakeHost.queries`)."""

    def __init__(self, host: FakeHost | None = None) -> None:
        self._host = host

    async def call_action(self, action: PluginToRuntimeAction, data: dict[str, Any],
                          timeout: float | None = 15.0) -> dict[str, Any]:
        """Like the SDK's Handler.call_action: the answer's data, ActionCallError for an error
        answer, ActionCallTimeoutError when none came in `timeout`."""
        if self._host is None or self._host.queries is None:
            raise ActionCallError(f"{action.value} is not answered by this fake host")
        try:
            return await asyncio.wait_for(self._host.queries.answer(self._host, action, dict(data)), timeout)
        except asyncio.TimeoutError:
            raise ActionCallTimeoutError(f"Action {action.value} call timed out") from None


@dataclass
class HostKnowledgeBase:
    """A knowledge base as LangBot holds it: its workspace, its stored retrieval settings, and
    the retrieve hook of the engine installation it belongs to (None: another engine's KB, which
    answers `other_engine_results`)."""

    uuid: str
    name: str
    workspace: str = DEFAULT_WORKSPACE
    description: str = ""
    retrieval_settings: dict[str, Any] = field(default_factory=dict)
    creation_settings: dict[str, Any] = field(default_factory=dict)
    engine: Callable[[RetrievalContext], Awaitable[RetrievalResponse]] | None = None
    other_engine_results: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class HostQuery:
    """A pipeline query in LangBot's query pool: `knowledge_base_uuids` is its
    `variables['_knowledge_base_uuids']`, the KBs the pipeline's runner may retrieve from."""

    query_id: int
    query_uuid: str
    workspace: str
    knowledge_base_uuids: list[Any]
    launcher: str = "person_user-1"
    bot_uuid: str = "bot-1"
    sender_id: str = "user-1"


class QueryScopedActions:
    """LangBot 4.11.2's LIST_PIPELINE_KNOWLEDGE_BASES and RETRIEVE_KNOWLEDGE_BASE (no run id) as
    pkg/plugin/handler.py answers them: the query is looked up by `query_uuid` when given, else by
    its legacy id, in the calling installation's workspace only; its KB set is its
    `_knowledge_base_uuids` (strings, in order, duplicates dropped); each KB is looked up in that
    workspace; a retrieve of a KB outside the set is refused, and otherwise merges the KB's stored
    retrieval settings under the request's (top_k, filters, session_name, bot_uuid, sender_id),
    pops `filters`, and calls the KB's engine (pkg/rag/knowledge/kbmgr.py)."""

    def __init__(self) -> None:
        self.knowledge_bases: dict[str, HostKnowledgeBase] = {}
        self.pool: dict[str, HostQuery] = {}
        self.retrieved: list[dict[str, Any]] = []  # every retrieve that reached an engine

    def add_knowledge_base(self, kb: HostKnowledgeBase) -> HostKnowledgeBase:
        self.knowledge_bases[kb.uuid] = kb
        return kb

    def start_query(self, knowledge_base_uuids: list[Any], workspace: str = DEFAULT_WORKSPACE) -> HostQuery:
        query = HostQuery(len(self.pool) + 1, f"query-{len(self.pool) + 1}", workspace, list(knowledge_base_uuids))
        self.pool[query.query_uuid] = query
        return query

    def finish_query(self, query: HostQuery) -> None:
        """The pipeline is done with it: LangBot drops it from the pool."""
        self.pool.pop(query.query_uuid, None)

    async def answer(self, host: FakeHost, action: PluginToRuntimeAction, data: dict[str, Any]) -> dict[str, Any]:
        method = {PluginToRuntimeAction.LIST_PIPELINE_KNOWLEDGE_BASES: "list_pipeline_knowledge_bases",
                  PluginToRuntimeAction.RETRIEVE_KNOWLEDGE_BASE: "retrieve_knowledge_base"}.get(action)
        if method is None:
            raise ActionCallError(f"{action.value} is not answered by this fake host")
        await host._call(method, **data)
        binding = current_binding(host.plugin_runtime_handler)
        workspace = getattr(binding, "workspace_uuid", None) or DEFAULT_WORKSPACE
        query = self._resolve(data, workspace)
        if query is None:
            raise ActionCallError(f"Query with query_id {data.get('query_id')} not found")
        allowed = list(dict.fromkeys(u for u in query.knowledge_base_uuids if isinstance(u, str) and u))
        if method == "list_pipeline_knowledge_bases":
            found = [self.knowledge_bases.get(u) for u in allowed]
            return {"knowledge_bases": [{"uuid": kb.uuid, "name": kb.name, "description": kb.description}
                                        for kb in found if kb is not None and kb.workspace == workspace]}
        kb_id = data["kb_id"]
        if kb_id not in allowed:
            raise ActionCallError(f"Knowledge base {kb_id} is not configured for this pipeline")
        kb = self.knowledge_bases.get(kb_id)
        if kb is None or kb.workspace != workspace:
            raise ActionCallError(f"Knowledge base {kb_id} not found")
        settings = {**kb.retrieval_settings, "top_k": data.get("top_k", 5), "filters": data.get("filters") or {},
                    "session_name": query.launcher, "bot_uuid": query.bot_uuid, "sender_id": query.sender_id}
        filters = settings.pop("filters")
        self.retrieved.append({"kb_id": kb_id, "query": data["query_text"], "filters": filters,
                               "top_k": settings["top_k"]})
        if kb.engine is None:
            return {"results": list(kb.other_engine_results)}
        context = RetrievalContext(query=data["query_text"], knowledge_base_id=kb.uuid, collection_id=kb.uuid,
                                   retrieval_settings=settings, creation_settings=dict(kb.creation_settings),
                                   filters=filters)
        # The runtime sends the engine its own RETRIEVE action: a task of its own, not the tool's.
        response = await asyncio.create_task(kb.engine(context), context=contextvars.Context())
        return {"results": [entry.model_dump(mode="json") for entry in response.results]}

    def _resolve(self, data: dict[str, Any], workspace: str) -> HostQuery | None:
        if data.get("query_uuid") is not None:
            query = self.pool.get(data["query_uuid"])
        else:
            query = next((q for q in self.pool.values() if q.query_id == data.get("query_id")), None)
        return query if query is not None and query.workspace == workspace else None


class LoopStallMonitor:
    """Schedules a callback every `interval` seconds and records how late the loop ran it.

    `longest` is the longest time the loop did not run a callback that was due (seconds). For
    benchmarks to print; tests must not assert wall-clock numbers."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.longest = 0.0
        self.ticks = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._due = 0.0
        self._handle: asyncio.TimerHandle | None = None

    async def __aenter__(self) -> LoopStallMonitor:
        self._loop = asyncio.get_running_loop()
        self._schedule(self._loop.time())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._tick()
        if self._handle is not None:
            self._handle.cancel()

    def _schedule(self, now: float) -> None:
        assert self._loop is not None
        self._due = now + self.interval
        self._handle = self._loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        assert self._loop is not None
        now = self._loop.time()
        self.longest = max(self.longest, now - self._due)
        self.ticks += 1
        self._schedule(now)


class FakeHost:
    def __init__(self, embed: Callable[[str], list[float]] = hash_embed, metric: str = "squared_l2",
                 keep_metadata: tuple[str, ...] | None = None, required_metadata: tuple[str, ...] = (),
                 strip_filters: bool = False, default_dim: int | None = None,
                 list_window: int | None = None, latency: float = 0.0, embed_scale: float = 1.0) -> None:
        self.embed_fn = embed
        self.latency = latency  # seconds each host call takes; 0 still yields to the loop
        self.embed_scale = embed_scale  # e.g. 8.0: vectors that are not unit length (Ollama, TEI)
        self.metric = metric  # squared_l2 (Chroma) | cosine_distance (pgvector) | similarity (Milvus)
        self.keep_metadata = keep_metadata  # e.g. ("text", "file_id") to behave like Milvus/pgvector
        self.required_metadata = required_metadata  # Milvus: an insert without these keys fails
        self.strip_filters = strip_filters  # Milvus: filters on fields not kept (and $and/$or) ignored
        self.default_dim = default_dim  # Milvus: touching a missing collection creates it (dim 1536)
        self.list_window = list_window  # Milvus: query offset + limit must be <= 16384
        self.files: dict[str, bytes] = {}
        self.collections: dict[str, dict[str, tuple[list[float], dict[str, Any]]]] = {}
        self.dims: dict[str, int] = {}
        self.storage: dict[str, bytes] = {}  # the dedicated installation's (calls without a binding)
        self.installation_storage: dict[str, dict[str, bytes]] = {}  # installation uuid -> its storage
        self.calls: Counter[str] = Counter()
        self.embedded_texts = 0
        self.faults: dict[str, Callable[..., None]] = {}
        self.hangs: dict[str, Callable[..., bool]] = {}  # method -> which calls never answer
        self.max_embed_batch: int | None = None
        self.batch_error = "langbot"  # a key of BATCH_ERRORS
        self.oversized_batches = 0  # embedding calls refused as too large
        self.bursts: dict[str, list[str]] = {}  # method -> kinds of the next failures
        self.disconnected: Exception | None = None
        self.refused: Counter[str] = Counter()  # calls refused because their invocation had ended
        self.in_flight: Counter[str] = Counter()  # calls of each method waiting for their answer now
        self.peak_in_flight: Counter[str] = Counter()  # the most of them at once
        self.reads: Counter[str] = Counter()  # plugin-storage reads per key
        # LangBot 4.11.2 deletes a KB's row right after on_knowledge_base_delete returns; from then
        # on every vector call for it fails in rag/service/runtime.py (the vectors stay behind).
        self.deleted_kbs: set[str] = set()
        self.plugin_runtime_handler = RuntimeHandler(self)
        self.queries: QueryScopedActions | None = None  # LangBot's pipeline queries, for Tool calls
        self.rerank_fn: Callable[[str, list[str]], list[float]] | None = None
        # invoke_llm: messages -> reply text (None: the model does not exist, as LangBot answers)
        self.llm_fn: Callable[[list[Any]], str] | None = None

    @classmethod
    def milvus(cls, **kwargs: Any) -> FakeHost:
        """Like LangBot 4.11.2's Milvus (Lite) adapter."""
        options: dict[str, Any] = dict(metric="similarity", keep_metadata=("text", "file_id", "uuid"),
                                       required_metadata=("text", "file_id", "uuid"), strip_filters=True,
                                       default_dim=1536, list_window=16384)
        return cls(**{**options, **kwargs})

    @classmethod
    def pgvector(cls, **kwargs: Any) -> FakeHost:
        """Like LangBot 4.11.2's pgvector adapter: cosine distance, only text / file_id / uuid
        kept (so filters on other fields are dropped), no collection created by touching it."""
        options: dict[str, Any] = dict(metric="cosine_distance", keep_metadata=("text", "file_id", "uuid"),
                                       strip_filters=True)
        return cls(**{**options, **kwargs})

    def _host_filter(self, filters: dict[str, Any] | None) -> dict[str, Any] | None:
        """What of a filter reaches the backend: Milvus keeps top-level clauses on kept fields."""
        if not filters or not self.strip_filters:
            return filters
        kept = {k: v for k, v in filters.items() if k in (self.keep_metadata or ())}
        return kept or None

    def _touch(self, collection_id: str) -> None:
        if self.default_dim is not None and collection_id not in self.collections:
            self.collections[collection_id] = {}
            self.dims[collection_id] = self.default_dim

    # ------------------------------------------------------------------ helpers for tests
    def fail(self, method: str, when: Callable[..., bool] | None = None, error: Exception | None = None) -> None:
        """Make `method` raise `error` (default HostError) whenever `when(**kwargs)` is true."""
        def fault(**kwargs: Any) -> None:
            if when is None or when(**kwargs):
                raise error or HostError(f"{method} failed")
        self.faults[method] = fault

    def hang(self, method: str, when: Callable[..., bool] | None = None) -> None:
        """Calls of `method` (where `when(**kwargs)`) never answer: a host that lets the SDK's
        timeout (15 s for storage, 30 s for vector calls) run out."""
        self.hangs[method] = when or (lambda **_: True)

    def burst(self, method: str, count: int, kind: str = "503") -> None:
        """Make the next `count` calls of `method` fail like a provider under load (429/503/timeout)."""
        self.bursts.setdefault(method, []).extend([kind] * count)

    def disconnect(self, style: str = "closed") -> None:
        """LangBot went away: every later call fails like the SDK's, until `reconnect()`."""
        self.disconnected = (ConnectionClosedError("Connection closed") if style == "closed"
                             else AttributeError("'NoneType' object has no attribute 'call_action'"))

    def disconnect_on(self, method: str, nth: int = 1, style: str = "closed") -> None:
        """Drop the connection when `method` is called for the `nth` time (counting from now)."""
        seen = {"n": 0}

        def fault(**_: Any) -> None:
            seen["n"] += 1
            if seen["n"] == nth:
                self.disconnect(style)
                raise self.disconnected  # type: ignore[misc]
        self.faults[method] = fault

    def reconnect(self) -> None:
        self.disconnected = None

    async def _call(self, method: str, **kwargs: Any) -> None:
        """What every SDK host call does before and after the host answers, then `_enter`."""
        try:
            invocation = invocation_capability(self.plugin_runtime_handler)
        except RuntimeError:
            self.refused[method] += 1
            raise
        if self.disconnected is not None:
            raise self.disconnected
        hang = self.hangs.get(method)
        if hang is not None and hang(**kwargs):
            self.calls[method] += 1
            await asyncio.Event().wait()
        self.in_flight[method] += 1
        self.peak_in_flight[method] = max(self.peak_in_flight[method], self.in_flight[method])
        try:
            await asyncio.sleep(self.latency)
        finally:
            self.in_flight[method] -= 1
        if invocation is not None and not invocation.active:
            self.refused[method] += 1
            invocation.require_active()
        self._enter(method, **kwargs)

    def _enter(self, method: str, **kwargs: Any) -> None:
        """The host received the call: count it, then fail it if a burst or fault says so."""
        self.calls[method] += 1
        if method.startswith("vector_") and kwargs.get("collection_id") in self.deleted_kbs:
            raise HostError("Knowledge base not found")
        burst = self.bursts.get(method)
        if burst:
            summary = BURST_ERRORS[burst.pop(0)]
            if method == "invoke_embedding":
                raise langbot_embedding_error(str(kwargs["embedding_model_uuid"]), summary)
            raise HostError(f"{method}: {summary}")
        fault = self.faults.get(method)
        if fault:
            fault(**kwargs)

    def vectors_of(self, collection_id: str, file_id: str | None = None) -> list[dict[str, Any]]:
        items = self.collections.get(collection_id, {})
        return [m for _, m in items.values() if file_id is None or m.get("file_id") == file_id]

    def vector_count(self, collection_id: str | None = None) -> int:
        if collection_id is None:
            return sum(len(c) for c in self.collections.values())
        return len(self.collections.get(collection_id, {}))

    # ------------------------------------------------------------------ SDK API
    async def invoke_embedding(self, embedding_model_uuid: str, texts: list[str]) -> list[list[float]]:
        await self._call("invoke_embedding", embedding_model_uuid=embedding_model_uuid, texts=texts)
        if self.max_embed_batch is not None and len(texts) > self.max_embed_batch:
            self.oversized_batches += 1
            raise BATCH_ERRORS[self.batch_error](embedding_model_uuid, len(texts), self.max_embed_batch)
        self.embedded_texts += len(texts)
        return [[x * self.embed_scale for x in self.embed_fn(t)] for t in texts]

    async def invoke_llm(self, llm_model_uuid: str, messages: list[Any], funcs: list[Any] = [],  # noqa: B006
                         extra_args: dict[str, Any] = {}, timeout: float | None = None) -> Any:  # noqa: B006
        from langbot_plugin.api.entities.builtin.provider.message import Message

        await self._call("invoke_llm", llm_model_uuid=llm_model_uuid, messages=messages)
        if self.llm_fn is None:
            raise HostError(f"Model {llm_model_uuid} not found")
        return Message(role="assistant", content=self.llm_fn(messages))

    async def invoke_rerank(self, rerank_model_uuid: str, query: str, documents: list[str],
                            top_k: int | None = None, extra_args: dict[str, Any] | None = None,
                            timeout: float = 60.0) -> list[dict[str, Any]]:
        await self._call("invoke_rerank", query=query, documents=documents)
        if len(documents) > 64:
            raise HostError("at most 64 documents per rerank call")
        scores = self.rerank_fn(query, documents) if self.rerank_fn else [0.5] * len(documents)
        ranked = sorted(range(len(documents)), key=lambda i: scores[i], reverse=True)
        return [{"index": i, "relevance_score": scores[i]} for i in ranked[: top_k or len(documents)]]

    async def _upsert_called(self, collection_id: str, vectors: list[list[float]], ids: list[str],
                             metadata: list[dict[str, Any]] | None) -> None:
        """What every vector store does first with an upsert: the call itself, then its arguments'
        lengths checked."""
        await self._call("vector_upsert", collection_id=collection_id, ids=ids)
        if len(vectors) != len(ids) or (metadata is not None and len(metadata) != len(ids)):
            raise HostError("vectors, ids and metadata must have the same length")

    async def vector_upsert(self, collection_id: str, vectors: list[list[float]], ids: list[str],
                            metadata: list[dict[str, Any]] | None = None,
                            documents: list[str] | None = None) -> None:
        await self._upsert_called(collection_id, vectors, ids, metadata)
        collection = self.collections.setdefault(collection_id, {})
        for vector, chunk_id, meta in zip(vectors, ids, metadata or [{}] * len(ids)):
            dim = self.dims.setdefault(collection_id, len(vector))
            if len(vector) != dim:
                raise HostError(f"dimension {len(vector)} does not match collection dimension {dim}")
            missing = [k for k in self.required_metadata if k not in meta]
            if missing:
                raise HostError(f"Insert missed an field `{missing[0]}` to collection without set nullable")
            for key, value in meta.items():
                if not isinstance(value, (str, int, float, bool)):
                    raise HostError(f"metadata value for {key} must be str/int/float/bool")
            kept = {k: v for k, v in meta.items() if self.keep_metadata is None or k in self.keep_metadata}
            if self.keep_metadata is None:  # the host's scoping keys survive only where all metadata does
                kept["_langbot_knowledge_base_uuid"] = collection_id
            collection[chunk_id] = (list(vector), kept)

    async def vector_search(self, collection_id: str, query_vector: list[float], top_k: int = 5,
                            filters: dict[str, Any] | None = None, search_type: str = "vector",
                            query_text: str = "", vector_weight: float | None = None) -> list[dict[str, Any]]:
        await self._call("vector_search", collection_id=collection_id, filters=filters)
        self._touch(collection_id)
        filters = self._host_filter(filters)
        if filters and len(filters) > 1 and not self.strip_filters:
            raise HostError("Expected where to have exactly one operator")
        scored = []
        for chunk_id, (vector, meta) in self.collections.get(collection_id, {}).items():
            if filters and not matches(filters, meta):
                continue
            dot = sum(a * b for a, b in zip(vector, query_vector))
            squared = sum((a - b) ** 2 for a, b in zip(vector, query_vector))
            distance = {"squared_l2": squared, "cosine_distance": 1.0 - dot, "similarity": dot}[self.metric]
            scored.append({"id": chunk_id, "distance": distance, "metadata": dict(meta)})
        scored.sort(key=lambda r: r["distance"], reverse=self.metric == "similarity")
        return scored[:top_k]

    async def vector_delete(self, collection_id: str, file_ids: list[str] | None = None,
                            filters: dict[str, Any] | None = None) -> int:
        await self._call("vector_delete", collection_id=collection_id, file_ids=file_ids, filters=filters)
        self._touch(collection_id)
        collection = self.collections.get(collection_id, {})
        if file_ids:
            for chunk_id in [c for c, (_, m) in collection.items() if m.get("file_id") in file_ids]:
                del collection[chunk_id]
            return len(file_ids)
        filters = self._host_filter(filters)
        if filters:  # the host deletes by filter and reports 0 (no backend returns a count)
            for chunk_id in [c for c, (_, m) in collection.items() if matches(filters, m)]:
                del collection[chunk_id]
        return 0

    async def vector_list(self, collection_id: str, filters: dict[str, Any] | None = None,
                          limit: int = 20, offset: int = 0) -> dict[str, Any]:
        await self._call("vector_list", collection_id=collection_id, filters=filters, offset=offset)
        self._touch(collection_id)
        if self.list_window is not None and offset + limit > self.list_window:
            raise HostError(f"invalid max query result window, (offset+limit) should be in range [1, "
                            f"{self.list_window}], but got {offset + limit}")
        filters = self._host_filter(filters)
        items = [
            {"id": cid, "document": m.get("text"), "metadata": dict(m)}
            for cid, (_, m) in self.collections.get(collection_id, {}).items()
            if not filters or matches(filters, m)
        ]
        return {"items": items[offset : offset + limit], "total": -1 if filters else len(items)}

    async def get_knowledge_file_stream(self, storage_path: str) -> bytes:
        await self._call("get_knowledge_file_stream", storage_path=storage_path)
        if storage_path not in self.files:
            raise HostError(f"file not found: {storage_path}")
        return self.files[storage_path]

    def _storage(self) -> dict[str, bytes]:
        """The calling installation's plugin storage."""
        installation = getattr(current_binding(self.plugin_runtime_handler), "installation_uuid", None)
        return self.installation_storage.setdefault(installation, {}) if installation else self.storage

    async def set_plugin_storage(self, key: str, value: bytes) -> None:
        await self._call("set_plugin_storage", key=key)
        self._storage()[key] = bytes(value)

    async def get_plugin_storage(self, key: str) -> bytes:
        self.reads[key] += 1
        await self._call("get_plugin_storage", key=key)
        storage = self._storage()
        if key not in storage:
            raise HostError(f"Storage with key {key} not found")  # LangBot 4.11.2's words
        return storage[key]

    async def get_plugin_storage_keys(self) -> list[str]:
        await self._call("get_plugin_storage_keys")
        return list(self._storage())

    async def delete_plugin_storage(self, key: str) -> None:
        await self._call("delete_plugin_storage", key=key)
        self._storage().pop(key, None)


def ingestion_context(kb_id: str, storage_path: str, data: bytes, document_id: str,
                      creation_settings: dict[str, Any], mime_type: str = "",
                      parsed: Any = None) -> IngestionContext:
    """What LangBot hands `ingest` for an upload stored at `storage_path` (the caller puts `data`
    in the host's files): its storage key as the file name, the KB as its collection."""
    return IngestionContext(
        file_object=FileObject(
            metadata=FileMetadata(filename=storage_path, file_size=len(data), mime_type=mime_type,
                                  document_id=document_id, knowledge_base_id=kb_id),
            storage_path=storage_path,
        ),
        knowledge_base_id=kb_id,
        collection_id=kb_id,
        creation_settings=creation_settings,
        parsed_content=parsed,
    )
