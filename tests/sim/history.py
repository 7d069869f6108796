"""Seeded random histories of knowledge bases, run through the component as LangBot runs it,
with the invariants checked after every step and after a settle.

A history is plain data (so a shrunk one can be kept as a regression test): a backend, whether
every plugin-storage write fails for good (LangBot on SQLAlchemy 2.1), whether blocking work runs
in real threads, and steps. Each step sets the fault rates of the moment, runs 1-3 operations at
once, may kill the plugin process after a number of host calls (kill -9), and may restart it.
Operations: create a KB (KB 0 is created before the first step unless a step creates it), delete
a KB (LangBot drops its row when the hook returns, whatever it did), upload a document into a KB
(or upload the same document id again after it COMPLETED or FAILED), delete a document, retrieve
in every mode with and without filters, and the console (KB view, orphan scan, retry saving
records, rebuild from the vector DB, remove an interrupted file's vectors).

LangBot's side is modelled in `Book`: what each hook returned decides what the operator sees
(completed, failed, interrupted, deleted) and which upload of a document may be answered. The
invariants (`Violation` kinds):
- `raised`: a hook raised;
- `hook-timeout`: a hook outlived LangBot's timeout for it (lucidrag.base.budget.HOOK_TIMEOUT_S;
  LangBot gives up on it, the plugin carries on);
- `returned-gone`: a file whose delete returned True (or whose ingest returned FAILED) came back,
  or a file of another KB or none was returned;
- `old-version`: a document uploaded again was answered with the text of an upload other than its
  latest (an earlier upload of a document whose latest upload FAILED is `returned-gone`: LangBot
  shows it as failed);
- `not-found`: after the settle, a COMPLETED file is not found by its unique words in vector AND
  keyword mode;
- `stray-vectors`: after the settle, the vector DB holds vectors of a deleted, failed or unknown
  file, or an interrupted file has some of its vectors but not all;
- `stray-keys`: after the settle, a plugin-storage key that nothing references is left;
- `textless-vector`: after the settle, a vector of a KB's collection has no text (anyone opening
  the collection must be able to tell what each vector is);
- `kb-left`: after the settle, a plugin-storage key of a deleted KB is left, or a vector of one
  deleted while the vector DB had no faults (LangBot drops the KB when the hook returns: no later
  hook can reach its vectors);
- `upkeep-blocked`: after the settle's hooks on one KB, another KB's unfinished ingests (journal
  entries) are still there: one KB's trouble stopped the upkeep of the others (but for a KB whose
  storage holds no meta: whether its collection exists is unknown until its own first question);
- `wrong-collection`: a KB's collection got a dimension the embedding model does not have
  (Milvus creates a touched collection with 1536);
- `failed-healthy`: a good file's ingest FAILED while the host had no faults.
Faults per step: plugin-storage and vector calls refused, storage and vector calls whose answer
is lost after the host did them (`lost`), a slow host whose calls outlast the SDK's call timeout
and land later (`slow`), kill -9 after a number of host calls (the call that kills may or may not
have reached the host), restarts. Time is virtual (tests/sim/world.py), so deadlines and hook
timeouts fire as in production.
The settle: healthy host (but for writes that always fail), every call still in flight lands, a
restart (a new process over the same host) and time for the previous process's calls to land
(lucidrag.state.latewrites.PREVIOUS_PROCESS_LANDING_S), the deletes that returned False done again (the
operator retries them), a few hooks on one KB, then every KB's files looked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langbot_plugin.api.entities.builtin.rag.context import RetrievalContext
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus
from langbot_plugin.api.proxies.invocation import bind_invocation
from langbot_plugin.runtime.bounded_executor import blocking_work_scope, configure_bounded_default_executor

from components.knowledge_engine.lucid_rag import LucidRag
from lucidrag.base.budget import HOOK_TIMEOUT_S
from lucidrag.console import Console, ConsoleError
from lucidrag.index.segindex import SegmentIndex
from lucidrag.state.latewrites import PREVIOUS_PROCESS_LANDING_S
from lucidrag.state.records import probe_vector_id
from lucidrag.state.storage_keys import group_keys, index_manifest_key, keys_of_kb, kb_prefix, meta_key
from tests.fakes import ingestion_context
from tests.sim.documents import (
    SETTINGS,
    doc_bytes,
    doc_id,
    doc_number,
    doc_words,
    expected_chunks,
    tail_word,
    versions_holding,
)
from tests.sim.world import (
    BACKENDS,
    STORAGE_METHODS,
    SIM_DIM,
    Deadlock,
    Faults,
    Killed,
    PluginProcess,
    SimLoop,
    busy_thread,
    inline_blocking,
    make_host,
    small_listing_window,
    threaded_blocking,
    virtual_time,
)

KB = "kb-sim"
CREATION_OUTAGE_LANDED = 0.3  # of the writes refused in an outage from a KB's creation on, done all the same
# Step.outage's names of the plugin-storage calls
OUTAGE_METHODS = {"set": "set_plugin_storage", "delete": "delete_plugin_storage", "get": "get_plugin_storage",
                  "get_keys": "get_plugin_storage_keys"}
MODES = ("vector", "keyword", "hybrid")
REPAIRS = ("retry_saving_records", "rebuild_from_vector_db", "scan", "view")
SETTLE_HOOKS = 3
CONSOLE_TIMEOUT_S = 30.0  # the runtime's page API call (runtime/io/handlers/plugin.py call_page_api)
MAX_KBS = 3
NO_DOC = 999  # a document number no history uploads: its words are in no file
T = TypeVar("T")

# ("create_kb", k) | ("delete_kb", k) | ("ingest", doc, kind[, k]) | ("delete", doc)
# | ("retrieve", doc, mode, filter) | ("repair", action[, k]) | ("repair", "remove_orphan_vectors", k, doc)
Op = tuple


def with_document_vector(chunks: int) -> int:
    """Vectors of a whole upload of this many chunks: a file of two or more also has its document
    vector."""
    return chunks + 1 if chunks >= 2 else chunks


def kb_name(k: int) -> str:
    return KB if k == 0 else f"{KB}-{k}"


@dataclass
class Step:
    ops: list[Op]
    storage: float = 0.0  # failure rate of plugin-storage calls during the step
    vectors: float = 0.0  # failure rate of vector calls during the step
    lost: float = 0.0  # rate of storage and vector calls the host does but whose answer is lost
    slow: float = 0.0  # rate of storage and vector calls that outlast the SDK's call timeout
    kill_after: int | None = None  # kill -9 after this many host calls of the step
    restart: bool = False  # a new plugin process after the step
    # the plugin-storage calls `storage` applies to (an outage of some of them; empty: all)
    outage: tuple[str, ...] = ()
    landed: float = 0.0  # of the storage writes and deletes refused, the share LangBot did all the same
    kill_at: float | None = None  # kill -9 this many (virtual) seconds into the step, at whatever await

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in (("storage", self.storage), ("vectors", self.vectors),
                        ("lost", self.lost), ("slow", self.slow), ("kill_after", self.kill_after),
                        ("restart", self.restart), ("outage", self.outage), ("landed", self.landed),
                        ("kill_at", self.kill_at)) if v)
        return f"Step({self.ops!r}{extra})"


@dataclass
class History:
    seed: int
    backend: str
    steps: list[Step]
    writes_fail: bool = False  # every plugin-storage write refused, all along (LangBot on SQLAlchemy 2.1)
    threads: bool = False  # blocking work in real worker threads (not replayable exactly)
    # every plugin-storage write refused from before KB 0's creation until the first process is
    # replaced (a crash or restart), CREATION_OUTAGE_LANDED of them done all the same
    creation_outage: bool = False
    jitter_s: float = 0.0  # each host call first waits up to this long (virtual time)
    busy: bool = False  # a thread busy beside the history's (CPU contention: worker threads' timing)
    retry_seed: str = ""  # seeds the plugin's retry jitter (base/host.py) if set, else `seed` does

    def __repr__(self) -> str:
        extra = "".join(f", {k}=True" for k in ("writes_fail", "threads", "creation_outage", "busy")
                        if getattr(self, k))
        extra += f", jitter_s={self.jitter_s!r}" if self.jitter_s else ""
        extra += f", retry_seed={self.retry_seed!r}" if self.retry_seed else ""
        return f"History({self.seed}, {self.backend!r}, {self.steps!r}{extra})"


@dataclass(frozen=True)
class Violation:
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


class HistoryFailed(Exception):
    def __init__(self, violation: Violation) -> None:
        super().__init__(str(violation))
        self.violation = violation


# ---------------------------------------------------------------------- generation
def generate(seed: int, without: frozenset[str] = frozenset()) -> History:
    """Seed `seed`'s history; `without` leaves out operations ("reupload", "delete_kb") so that
    the defects they find do not hide others (the other draws stay as they were)."""
    rng = random.Random(seed)
    steps: list[Step] = []
    live: list[int] = []
    docs_of: dict[int, list[int]] = {}  # KB -> documents uploaded to it
    next_doc, next_kb = 0, 0
    for number in range(rng.randint(8, 16)):
        ops: list[Op] = []
        for _ in range(rng.choice((1, 1, 2, 2, 3))):
            roll = rng.random()
            if not live or (roll < 0.04 and next_kb < MAX_KBS):
                ops.append(("create_kb", next_kb))
                live.append(next_kb)
                docs_of[next_kb] = []
                next_kb += 1
                continue
            kb = rng.choice(live)
            ingested = docs_of[kb]
            if roll < 0.07 and number > 0:
                if "delete_kb" in without:
                    continue
                ops.append(("delete_kb", kb))
                live.remove(kb)
            elif roll < 0.40 or not ingested:
                kind = rng.choice(("small", "small", "medium", "bad")) if rng.random() < 0.92 else "large"
                ops.append(("ingest", next_doc, kind, kb))
                ingested.append(next_doc)
                next_doc += 1
            elif roll < 0.47:
                again = ("ingest", rng.choice(ingested), rng.choice(("small", "medium", "bad")), kb)
                if "reupload" not in without and not _touches(ops, again[1]):
                    ops.append(again)
            elif roll < 0.62:
                target = rng.choice(ingested)
                if not _touches(ops, target):
                    ops.append(("delete", target))
            elif roll < 0.90:
                filt = rng.choice(("none", "none", "file", "not-file"))
                ops.append(("retrieve", rng.choice(ingested), rng.choice(MODES), filt))
            elif roll < 0.95:
                ops.append(("repair", rng.choice(REPAIRS), kb))
            else:
                ops.append(("repair", "remove_orphan_vectors", kb, rng.choice(ingested)))
        step = Step(ops)
        if rng.random() < 0.3:
            step.storage = rng.choice((0.3, 0.5, 1.0))
        if rng.random() < 0.15:
            step.vectors = rng.choice((0.2, 0.5))
        if rng.random() < 0.15:
            step.lost = rng.choice((0.2, 0.5))
        if rng.random() < 0.1:
            step.slow = rng.choice((0.2, 0.5, 1.0))
        if rng.random() < 0.12:
            step.kill_after = rng.randint(1, 40)
        elif rng.random() < 0.1:
            step.restart = True
        steps.append(step)
    history = History(seed, BACKENDS[seed % len(BACKENDS)], steps, writes_fail=rng.random() < 0.05,
                      threads=rng.random() < 0.2)
    return _with_world_faults(history, random.Random(f"world-{seed}"))


def _touches(ops: list[Op], doc: int) -> bool:
    """Whether the step already uploads or deletes document `doc`: LangBot gives every upload a
    new document id, so an upload and a delete of one id never run at once (which of the two
    LangBot saw last could not be told from the hooks' answers)."""
    return any(op[0] in ("ingest", "delete") and op[1] == doc for op in ops)


def _with_world_faults(history: History, rng: random.Random) -> History:
    """The faults of the world beside a history's own draws (a stream of their own, so that a seed
    keeps its operations): host calls jittered 0-8 ms; a busy thread beside half the threaded
    histories; a KB created while every storage write fails until the process is replaced; outages
    of some storage calls over a few steps (ended by a crash or restart); refused writes that
    LangBot did all the same; kill -9 at a moment of a step rather than at a host call."""
    history.jitter_s = 0.008
    history.busy = history.threads and rng.random() < 0.5
    history.creation_outage = not history.writes_fail and rng.random() < 0.08
    outage: tuple[str, ...] = ()
    left = 0
    for step in history.steps:
        if not left and rng.random() < 0.08:
            outage = tuple(sorted(rng.sample(sorted(OUTAGE_METHODS), rng.randint(1, 3))))
            left = rng.randint(2, 6)
        if left and not step.storage:
            step.storage, step.outage, step.landed = 0.5, outage, 0.3
        elif step.storage and rng.random() < 0.3:
            step.landed = 0.3
        if step.kill_after is None and not step.restart and rng.random() < 0.06:
            step.kill_at = rng.uniform(0.0, 2.0)
        left = 0 if step.kill_after is not None or step.kill_at is not None or step.restart else max(left - 1, 0)
    return history


# ---------------------------------------------------------------------- LangBot's side
@dataclass
class DocState:
    kind: str
    kb: int
    status: str = "new"  # new | completed | failed | interrupted | deleted | removed | delete-failed | kb-deleted
    chunks: int = 0
    kinds: list[str] = field(default_factory=list)  # kinds[v]: the kind of upload v
    answerable: set[int] = field(default_factory=set)  # the uploads that may be answered

    @property
    def version(self) -> int:
        return len(self.kinds) - 1


@dataclass
class Book:
    docs: dict[int, DocState] = field(default_factory=dict)
    kbs: dict[int, str] = field(default_factory=dict)  # KB -> live | deleted

    def gone(self) -> set[str]:
        """Files that must never be returned again."""
        return {doc_id(n) for n, d in self.docs.items() if d.status in ("deleted", "failed", "removed")}

    def live_kbs(self) -> list[int]:
        return sorted(k for k, s in self.kbs.items() if s == "live")


# ---------------------------------------------------------------------- running
class Runner:
    def __init__(self, history: History) -> None:
        self.history = history
        self.rng = random.Random(history.seed * 7919 + 1)
        self.host = make_host(history.backend)
        self.faults = Faults(self.rng)
        self.faults.writes_fail = history.writes_fail
        self.book = Book()
        self.landings: set[asyncio.Task[Any]] = set()
        self.vector_writes_due: Counter[str] = Counter()  # upserts LangBot has yet to do, per collection
        self.creating: dict[int, asyncio.Event] = {}  # KBs whose creation hook runs now
        self.deleting: set[int] = set()  # documents whose delete hook runs now
        self.vectors_may_stay: set[int] = set()  # KBs deleted while the vector DB was faulty
        self.kbs_being_deleted: set[int] = set()  # KBs whose deletion hook has started
        self.killing = False  # the step kills the plugin process (kill -9)
        self.process = self._new_process()

    def _new_process(self) -> PluginProcess:
        self.faults.writes_refused = False  # an outage ends with the process it was injected into
        process = PluginProcess(self.host, self.faults, self.rng,
                                lambda: [kb_name(k) for k in self.book.live_kbs()], self.landings,
                                self.vector_writes_due, self.history.jitter_s)
        self.component = LucidRag()
        self.component.plugin = process  # type: ignore[assignment]
        return process

    async def _invoke(self, name: str, limit: float, hook: Callable[..., Awaitable[T]], *args: Any) -> T:
        """As the runtime calls a hook: bound to an invocation, in the workspace's blocking scope,
        and given up on after LangBot's timeout `limit` (the hook carries on). Raises
        HistoryFailed if the hook raised (other than being killed) or outlived `limit`."""
        async def call() -> T:
            with bind_invocation(self.host.plugin_runtime_handler, config={}, binding=None):
                with blocking_work_scope("sim"):
                    return await hook(*args)

        process = self.process
        task = asyncio.ensure_future(call())
        done, _ = await asyncio.wait({task}, timeout=limit)
        if not done:
            raise HistoryFailed(Violation("hook-timeout", f"{name} still running after {limit} s "
                                                          "(LangBot gave up on it)"))
        try:
            result = task.result()
            if process.dead:
                raise Killed()  # killed before it answered: LangBot never hears of it
            return result
        except (Killed, ConsoleError):
            raise
        except Exception as error:  # noqa: BLE001 - the invariant
            raise HistoryFailed(Violation("raised", f"{name} raised {type(error).__name__}: {error}")) from error

    async def run(self) -> None:
        if self.history.creation_outage:
            self.faults.writes_refused, self.faults.creation_landed = True, CREATION_OUTAGE_LANDED
        if not any(op[0] == "create_kb" for step in self.history.steps for op in step.ops):
            await self._create_kb(0)
        for number, step in enumerate(self.history.steps):
            await self._step(number, step)
        await self._settle()

    async def _step(self, number: int, step: Step) -> None:
        self.faults.storage, self.faults.vectors = step.storage, step.vectors
        self.faults.lost, self.faults.slow = step.lost, step.slow
        self.faults.landed = step.landed
        self.faults.storage_methods = (frozenset(OUTAGE_METHODS[m] for m in step.outage) if step.outage
                                       else STORAGE_METHODS)
        self.process.kill_after = step.kill_after
        self.killing = step.kill_after is not None or step.kill_at is not None
        kill = (asyncio.get_running_loop().call_later(step.kill_at, self.process.kill)
                if step.kill_at is not None else None)
        healthy = not (step.storage or step.vectors or step.lost or step.slow or self.history.writes_fail
                       or self.faults.writes_refused)
        ops: list[Op] = []
        for op in step.ops:
            if self._allowed(op):
                self._start(op)
                ops.append(op)
        results = await asyncio.gather(*(self._op(op, healthy) for op in ops), return_exceptions=True)
        if kill is not None:
            kill.cancel()
        self._check_collections(f"step {number}")  # first: a wrong collection fails the uploads too
        for op, result in zip(ops, results):
            if isinstance(result, HistoryFailed):
                raise HistoryFailed(Violation(result.violation.kind, f"step {number} {op}: {result.violation.detail}"))
            if isinstance(result, Killed):
                doc = self.book.docs.get(op[1]) if op[0] in ("ingest", "delete") else None
                if doc is not None and doc.status != "kb-deleted":
                    doc.status = "interrupted" if op[0] == "ingest" else "delete-failed"
                elif op[0] == "create_kb" and self.book.kbs.get(op[1]) != "deleted":
                    self.book.kbs[op[1]] = "live"  # LangBot timed the hook out... or kept the KB
            elif isinstance(result, BaseException):
                raise result
        self.faults.clear()
        self.process.kill_after = None
        if self.process.dead or step.restart:
            self.process.kill()
            self.process = self._new_process()

    def _kb_of(self, op: Op) -> int:
        if op[0] in ("create_kb", "delete_kb"):
            return op[1]
        if op[0] == "ingest":
            return op[3] if len(op) > 3 else 0
        if op[0] == "repair":
            return op[2] if len(op) > 2 else 0
        doc = self.book.docs.get(op[1])
        return doc.kb if doc is not None else 0

    def _allowed(self, op: Op) -> bool:
        """What LangBot lets the operator do: upload a new file, or a document id again once it
        COMPLETED or FAILED; delete a file that finished (completed or failed, or whose delete
        failed); delete a KB without interrupted files; the console removes an interrupted
        file's vectors."""
        kb = self._kb_of(op)
        if op[0] == "create_kb":
            return kb not in self.book.kbs
        if self.book.kbs.get(kb) != "live":
            return False
        doc = self.book.docs.get(op[1]) if op[0] in ("ingest", "delete") else None
        if op[0] == "delete_kb":
            return not any(d.kb == kb and d.status == "interrupted" for d in self.book.docs.values())
        if op[0] == "ingest":
            return doc is None or (doc.kb == kb and doc.status in ("completed", "failed"))
        if op[0] == "delete":
            return doc is not None and doc.status in ("completed", "failed", "delete-failed")
        if op[0] == "repair" and op[1] == "remove_orphan_vectors":
            target = self.book.docs.get(op[3])
            return target is not None and target.kb == kb and target.status == "interrupted"
        return True

    def _start(self, op: Op) -> None:
        if op[0] == "ingest":
            doc = self.book.docs.setdefault(op[1], DocState(op[2], self._kb_of(op)))
            doc.kind, doc.status = op[2], "new"
            doc.kinds.append(op[2])
            doc.answerable.add(doc.version)  # the old upload stays until the new one is done
        elif op[0] == "create_kb":
            self.book.kbs[op[1]] = "live"
            self.creating[op[1]] = asyncio.Event()

    async def _op(self, op: Op, healthy: bool) -> None:
        creating = self.creating.get(self._kb_of(op))
        if creating is not None and op[0] != "create_kb":
            await creating.wait()  # LangBot shows a KB once its creation returned
        if op[0] == "ingest":
            await self._ingest(op[1], healthy)
        elif op[0] == "delete":
            await self._delete(op[1])
        elif op[0] == "retrieve":
            await self._retrieve(op[1], op[2], op[3])
        elif op[0] == "repair":
            await self._repair(self._kb_of(op), op[1], doc_id(op[3]) if len(op) > 3 else "")
        elif op[0] == "create_kb":
            await self._create_kb(op[1])
        elif op[0] == "delete_kb":
            await self._delete_kb(op[1])

    async def _create_kb(self, k: int) -> None:
        self.book.kbs[k] = "live"
        try:
            await self._invoke("on_knowledge_base_create", HOOK_TIMEOUT_S["create"],
                               self.component.on_knowledge_base_create, kb_name(k), dict(SETTINGS))
        finally:
            creating = self.creating.pop(k, None)
            if creating is not None:
                creating.set()

    async def _delete_kb(self, k: int) -> None:
        self.kbs_being_deleted.add(k)  # an upload of the KB may fail from here on ("deleted")
        if (self.faults.vectors or self.faults.lost or self.faults.slow or self.killing
                or self.vector_writes_due[kb_name(k)]):
            # the hook is the only time the plugin can reach the KB's vectors; a vector DB that
            # fails or hangs then (also a write sent before the hook and not done yet: seed 4548's
            # slow upsert landed after the hook's listing), or a kill -9, may leave some for good
            self.vectors_may_stay.add(k)
        try:
            await self._invoke("on_knowledge_base_delete", HOOK_TIMEOUT_S["kb_delete"],
                               self.component.on_knowledge_base_delete, kb_name(k))
        finally:  # LangBot drops the KB's row whatever the hook did, and its files with it
            self.host.deleted_kbs.add(kb_name(k))
            self.book.kbs[k] = "deleted"
            for doc in self.book.docs.values():
                if doc.kb == k:
                    doc.status = "kb-deleted"

    async def _ingest(self, n: int, healthy: bool) -> None:
        doc = self.book.docs[n]
        kb, version = kb_name(doc.kb), doc.version
        storage_path = f"v1/{kb}/{doc_id(n)}-{version}.txt"
        data = doc_bytes(n, doc.kind, version)
        self.host.files[storage_path] = data
        context = ingestion_context(kb, storage_path, data, doc_id(n), dict(SETTINGS), "text/plain")
        result = await self._invoke("ingest", HOOK_TIMEOUT_S["ingest"], self.component.ingest, context)
        del self.host.files[storage_path]  # LangBot deletes an upload once it reached a terminal status
        if doc.status == "kb-deleted" or doc.kb in self.kbs_being_deleted:
            doc.status = "kb-deleted"  # LangBot drops the file with its KB (queries under way may answer it)
            return
        if result.status == DocumentStatus.COMPLETED:
            doc.status, doc.chunks, doc.answerable = "completed", result.chunks_created, {version}
        else:
            doc.status, doc.answerable = "failed", set()
            if doc.kind != "bad" and healthy and doc.kb not in self.kbs_being_deleted:
                raise HistoryFailed(Violation("failed-healthy", f"{doc_id(n)}: {result.error_message}"))

    async def _delete(self, n: int) -> None:
        doc = self.book.docs[n]
        self.deleting.add(n)
        try:
            ok = await self._invoke("delete_document", HOOK_TIMEOUT_S["delete"],
                                    self.component.delete_document, kb_name(doc.kb), doc_id(n))
        finally:
            self.deleting.discard(n)
        if doc.status == "kb-deleted":
            return
        if ok is True:
            doc.status, doc.answerable = "deleted", set()
        else:
            doc.status = "delete-failed"

    async def _retrieve(self, n: int, mode: str, filt: str, top_k: int = 5, k: int | None = None,
                        query: str = "") -> list[str]:
        doc = self.book.docs.get(n)
        k = k if k is not None else doc.kb if doc is not None else 0
        kb = kb_name(k)
        filters: dict[str, Any] = {}
        if filt == "file":
            filters = {"file_id": doc_id(n)}
        elif filt == "not-file":
            filters = {"file_id": {"$ne": doc_id(n)}}
        context = RetrievalContext(query=query or " ".join(doc_words(n)), knowledge_base_id=kb, collection_id=kb,
                                   retrieval_settings={"top_k": top_k, "search_mode": mode},
                                   creation_settings=dict(SETTINGS), filters=filters)
        kb_was_live = self.book.kbs.get(k) == "live"
        settled = {d for d, state in self.book.docs.items() if state.status == "delete-failed"} - self.deleting
        response = await self._invoke("retrieve", HOOK_TIMEOUT_S["retrieve"], self.component.retrieve, context)
        files = []
        for entry in response.results:
            file_id = str((entry.metadata or {}).get("file_id"))
            files.append(file_id)
            self._check_answer(mode, k, file_id, entry.content[0].text if entry.content else "", kb_was_live)
            number = doc_number(file_id)
            if (number in settled - self.deleting and not self.host.vectors_of(kb, file_id)
                    and k not in self.kbs_being_deleted):  # (a KB deletion removes every vector meanwhile)
                raise HistoryFailed(Violation("returned-gone", f"retrieve {mode} returned {file_id}, whose delete "
                                                               "returned False after its vectors were deleted"))
        return files

    def _check_answer(self, mode: str, k: int, file_id: str, text: str, kb_was_live: bool) -> None:
        """`kb_was_live`: the KB was not deleted when the query started (a query running while
        its KB is deleted may still answer its files)."""
        doc = self.book.docs.get(doc_number(file_id))
        if doc is None or doc.kb != k:
            raise HistoryFailed(Violation("returned-gone", f"retrieve {mode} on {kb_name(k)} returned "
                                                           f"{file_id}, not a file of this KB"))
        versions = versions_holding(doc_number(file_id), doc.kinds, text)
        if doc.status == "kb-deleted" and kb_was_live:
            return
        if file_id in self.book.gone() or doc.status == "kb-deleted" or (versions and not doc.answerable):
            raise HistoryFailed(Violation("returned-gone", f"retrieve {mode} returned {file_id} ({doc.status}; "
                                                           f"upload {sorted(versions)} of {len(doc.kinds)})"))
        if versions and not versions & doc.answerable:
            raise HistoryFailed(Violation("old-version", f"retrieve {mode} returned upload {sorted(versions)} of "
                                                         f"{file_id} ({doc.status}; may answer {sorted(doc.answerable)})"))

    async def _repair(self, k: int, action: str, file_id: str = "") -> None:
        console = Console(self.process, self.process.engine, "dedicated")  # type: ignore[arg-type]
        if action == "scan":
            endpoint, body = "/scan", {"kb_id": kb_name(k)}
        elif action == "view":
            endpoint, body = "/kb", {"kb_id": kb_name(k)}
        else:
            endpoint = "/repair"
            body = {"kb_id": kb_name(k), "action": action, "file_id": file_id, "langbot_status": "interrupted"}
        try:
            await self._invoke("console", CONSOLE_TIMEOUT_S, console.handle, endpoint, body)
        except ConsoleError:
            return  # shown to the operator; a failure under faults is fine
        if action == "remove_orphan_vectors":
            doc = self.book.docs[doc_number(file_id)]
            if doc.status == "interrupted":
                doc.status, doc.answerable = "removed", set()

    # ------------------------------------------------------------------ the settle
    async def _settle(self) -> None:
        self.faults.clear()
        self.faults.writes_refused = False
        while self.landings:  # LangBot finishes every call it was sent
            await asyncio.wait(set(self.landings))
        if not self.process.dead:  # work this process keeps in memory goes on in its next hooks
            await self._settle_hooks()
        self.process.kill()
        self.process = self._new_process()
        # the operator comes back later: no call of the previous process can land any more
        await asyncio.sleep(PREVIOUS_PROCESS_LANDING_S)
        for n, doc in sorted(self.book.docs.items()):
            if doc.status == "delete-failed":  # LangBot kept the file; the operator deletes it again
                if self.history.writes_fail:
                    # storage holds nothing: a restarted plugin learns the collection exists from
                    # the KB's first question (or upload) before it may delete in it
                    await self._retrieve(n, "vector", "none")
                await self._delete(n)
                if doc.status != "deleted":
                    raise HistoryFailed(Violation("raised", f"deleting {doc_id(n)} on a healthy host failed"))
        self._check_upkeep(await self._settle_hooks())
        for k in self.book.live_kbs():
            # its own first question opens a collection that may not exist (a KB whose storage holds
            # no meta), and its entries are settled then (`_check_upkeep`)
            await self._retrieve(NO_DOC, "hybrid", "none", k=k)
            completed = sorted(n for n, d in self.book.docs.items() if d.kb == k and d.status == "completed")
            gone = sorted(n for n, d in self.book.docs.items() if d.kb == k and doc_id(n) in self.book.gone())
            for n in completed:
                for mode in ("vector", "keyword"):
                    if doc_id(n) not in await self._retrieve(n, mode, "none"):
                        raise HistoryFailed(Violation("not-found", f"{doc_id(n)} ({self.book.docs[n].kind}) "
                                                                   f"not found in {mode} mode after the settle"))
                if self.book.docs[n].kind == "large" and doc_id(n) not in await self._retrieve(
                        n, "keyword", "none", query=tail_word(n)):
                    raise HistoryFailed(Violation("not-found", f"{doc_id(n)}'s last chunks (past the listing "
                                                               "window) not found by keyword after the settle"))
            for n in gone:
                for mode in ("vector", "keyword"):
                    await self._retrieve(n, mode, "none")
            self._check_vectors(k)
            self._check_keys(k)

    async def _settle_hooks(self) -> int:
        """A few hooks on one KB (created if none is left); the upkeep of every KB runs in them."""
        if not self.book.live_kbs():
            await self._create_kb(max(self.book.kbs, default=-1) + 1)
        probe = self.book.live_kbs()[0]
        for _ in range(SETTLE_HOOKS):
            await self._invoke("delete_document", HOOK_TIMEOUT_S["delete"],
                               self.component.delete_document, kb_name(probe), "doc-none")
            await self._retrieve(NO_DOC, "hybrid", "none", k=probe)
        return probe

    # ------------------------------------------------------------------ invariants
    def _check_collections(self, where: str) -> None:
        for k in self.book.kbs:
            if k in self.kbs_being_deleted:
                continue  # LangBot keeps a deleted KB's collection, and no KB ever uses it again
            dim = self.host.dims.get(kb_name(k))
            if dim is not None and dim != SIM_DIM:
                raise HistoryFailed(Violation("wrong-collection", f"{where}: {kb_name(k)}'s collection has "
                                                                  f"dimension {dim}"))

    def _check_upkeep(self, probe: int) -> None:
        """Nothing is left of a deleted KB, and no other KB's unfinished ingest waits."""
        keys = list(self.host.storage)
        for k in self.book.live_kbs():
            journals = group_keys(keys).get((kb_name(k), "journal"), [])
            # (a KB whose storage holds no meta may have no collection yet: its entries wait for
            # its own first question, which opens one; `_check_keys` sees them after those)
            if k != probe and journals and meta_key(kb_name(k)) in self.host.storage:
                raise HistoryFailed(Violation("upkeep-blocked", f"hooks on {kb_name(probe)} left {kb_name(k)}'s "
                                                                f"unfinished ingests {sorted(journals)[:4]}"))
        for k in sorted(k for k, status in self.book.kbs.items() if status == "deleted"):
            left, vectors = keys_of_kb(keys, kb_name(k)), self.host.vectors_of(kb_name(k))
            if k in self.vectors_may_stay:
                vectors = []
            if left or vectors:
                raise HistoryFailed(Violation("kb-left", f"deleted {kb_name(k)} still has {len(vectors)} vectors "
                                                         f"and keys {sorted(left)[:4]} ({len(left)} in all)"))

    def _check_vectors(self, k: int) -> None:
        textless = sorted(i for i, (_, m) in self.host.collections.get(kb_name(k), {}).items()
                          if not str(m.get("text") or "").strip())
        if textless:
            raise HistoryFailed(Violation("textless-vector", f"{kb_name(k)}: {len(textless)} vectors without text"))
        per_file = Counter(str(m.get("file_id")) for m in self.host.vectors_of(kb_name(k)))
        # (a probe `remove_first_write` left under a file whose upload was then adopted goes with it)
        probes = Counter(str(m.get("file_id")) for i, (_, m) in self.host.collections.get(kb_name(k), {}).items()
                         if i == probe_vector_id(str(m.get("file_id"))))
        for file_id, count in sorted(per_file.items()):
            n = doc_number(file_id)
            doc = self.book.docs.get(n)
            status = doc.status if doc is not None and doc.kb == k else "unknown"
            if status in ("deleted", "failed", "removed", "unknown", "new"):
                raise HistoryFailed(Violation("stray-vectors", f"{count} vectors of {status} file {file_id}"))
            assert doc is not None
            count -= probes[file_id]
            if status == "completed" and count != with_document_vector(doc.chunks):
                raise HistoryFailed(Violation("stray-vectors", f"completed file {file_id} has {count} of "
                                                               f"{with_document_vector(doc.chunks)} vectors"))
            if status == "interrupted":
                whole = {with_document_vector(expected_chunks(n, kind, v))
                         for v, kind in enumerate(doc.kinds) if v in doc.answerable}
                if count and count not in whole:
                    raise HistoryFailed(Violation("stray-vectors", f"interrupted file {file_id} has {count} "
                                                                   f"vectors, not one whole upload {sorted(whole)}"))

    def _check_keys(self, k: int) -> None:
        kb = kb_name(k)
        keys = [key for key in self.host.storage if key.startswith(kb_prefix(kb))]
        groups = group_keys(keys)
        with_vectors = {str(m.get("file_id")) for m in self.host.vectors_of(kb)}
        stray = [f"file/{f}" for f in groups.get((kb, "file"), ()) if f not in with_vectors]
        stray += [f"journal/{f}" for f in groups.get((kb, "journal"), ())]
        manifest = self.host.storage.get(index_manifest_key(kb))
        live = set(SegmentIndex.manifest_segment_names(manifest)) if manifest else set()
        stray += [f"kw/seg/{s}" for s in groups.get((kb, "kw/seg"), ()) if s not in live]
        if stray:
            raise HistoryFailed(Violation("stray-keys", f"{kb}: {sorted(stray)[:5]} ({len(stray)} in all)"))


def run_history(history: History) -> Violation | None:
    """Run one history on a new event loop with virtual time; the first violation, or None."""
    random.seed(history.retry_seed or history.seed)  # the plugin's retry jitter (base/host.py): replays exactly
    loop = SimLoop()
    configure_bounded_default_executor(loop)
    blocking = threaded_blocking(loop) if history.threads else inline_blocking()
    try:
        with virtual_time(loop), small_listing_window(), blocking, busy_thread(history.busy):
            loop.run_until_complete(Runner(history).run())
        return None
    except HistoryFailed as failed:
        return failed.violation
    except Deadlock as error:
        return Violation("hook-timeout", f"every hook waits for ever: {error}")
    finally:
        _cancel_all(loop)
        # The executor's shutdown joins its threads in a thread of its own: the loop waits for it
        # for real, as for a worker thread. (Left waiting on virtual time, the loop took it for a
        # deadlock whenever that thread was slow, and the abandoned coroutine's `thread.join()` ran
        # later inside the garbage collector: in a thread starting up, it deadlocked the run.)
        loop.threads += 1
        try:
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.threads -= 1
        loop.close()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    for _ in range(3):  # a cancelled task may have started others (a call handed to LangBot)
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        if not pending:
            return
        for task in pending:
            task.cancel()
        with contextlib.suppress(BaseException):
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


def shrink(history: History, violation: Violation, budget_s: float = 120.0) -> History:
    """Drop steps, then operations, then faults, while the history still fails the same way."""
    deadline = time.monotonic() + budget_s

    def fails(candidate: History) -> bool:
        found = run_history(candidate)
        return found is not None and found.kind == violation.kind

    def replaced(current: History, i: int, step: Step) -> History:
        return dataclasses.replace(current, steps=current.steps[:i] + [step] + current.steps[i + 1:])

    current = history
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for i in range(len(current.steps) - 1, -1, -1):
            candidate = dataclasses.replace(current, steps=current.steps[:i] + current.steps[i + 1:])
            if fails(candidate):
                current, changed = candidate, True
        for i, step in enumerate(current.steps):
            for j in range(len(step.ops) - 1, -1, -1):
                if len(step.ops) == 1:
                    break
                smaller = dataclasses.replace(step, ops=step.ops[:j] + step.ops[j + 1:])
                if fails(replaced(current, i, smaller)):
                    current, step, changed = replaced(current, i, smaller), smaller, True
            for fault in ("storage", "vectors", "lost", "slow", "kill_after", "restart"):
                if getattr(step, fault):
                    calmer = dataclasses.replace(step, **{fault: None if fault == "kill_after" else type(getattr(step, fault))()})
                    if fails(replaced(current, i, calmer)):
                        current, step, changed = replaced(current, i, calmer), calmer, True
        for flag in ("writes_fail", "threads"):
            if getattr(current, flag) and fails(dataclasses.replace(current, **{flag: False})):
                current, changed = dataclasses.replace(current, **{flag: False}), True
    return current
