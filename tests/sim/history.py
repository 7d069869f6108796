"""Seeded random histories of one knowledge base, run through the component as LangBot runs it,
with the invariants checked after every step and after a settle.

A history is plain data (so a shrunk one can be kept as a regression test): a backend and steps.
Each step sets the fault rates of the moment, runs 1-3 operations at once (ingest, delete,
retrieve in every mode with and without filters, console repairs), may kill the plugin process
after a number of host calls (kill -9), and may restart it.

LangBot's side is modelled in `Book`: what each hook returned decides what the operator sees
(completed, failed, interrupted, deleted). The invariants (`Violation` kinds):
- `raised`: a hook raised, or outlived LangBot's timeout for it (lucidrag.base.budget.HOOK_TIMEOUT_S);
- `returned-gone`: a file whose delete returned True (or whose ingest returned FAILED) came back;
- `not-found`: after the settle, a COMPLETED file is not found by its unique words in vector AND
  keyword mode;
- `stray-vectors`: after the settle, the vector DB holds vectors of a deleted, failed or unknown
  file, or an interrupted file has some of its vectors but not all;
- `stray-keys`: after the settle, a plugin-storage key that nothing references is left;
- `wrong-collection`: the KB's collection got a dimension the embedding model does not have
  (Milvus creates a touched collection with 1536);
- `failed-healthy`: a good file's ingest FAILED while the host had no faults.
Faults per step: plugin-storage and vector calls refused, vector calls whose answer is lost after
the host did them (`lost`), kill -9 after a number of host calls (the call that kills may or may
not have reached the host), restarts.
The settle: healthy host, a restart (a new process over the same host), the deletes that returned
False done again (the operator retries them), a few retrieves.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langbot_plugin.api.entities.builtin.rag.context import RetrievalContext
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus
from langbot_plugin.api.proxies.invocation import bind_invocation
from langbot_plugin.runtime.bounded_executor import blocking_work_scope

import lucidrag.base.host
from components.knowledge_engine.lucid_rag import LucidRag
from lucidrag.base.budget import HOOK_TIMEOUT_S
from lucidrag.base.settings import parse_creation_settings
from lucidrag.console import Console, ConsoleError
from lucidrag.index.segindex import SegmentIndex
from lucidrag.ingestion.chunking import chunk_document
from lucidrag.ingestion.parsing import parse_file
from lucidrag.state.storage_keys import group_keys, index_manifest_key, kb_prefix
from tests.fakes import ingestion_context
from tests.sim.world import BACKENDS, SIM_DIM, Faults, Killed, PluginProcess, inline_blocking, make_host

KB = "kb-sim"
MODEL = "embed-sim"
SETTINGS = {"embedding_model_uuid": MODEL}
MODES = ("vector", "keyword", "hybrid")
REPAIRS = ("retry_saving_records", "rebuild_from_vector_db")
SETTLE_HOOKS = 3
T = TypeVar("T")

_FILLER = ("report", "system", "energy", "market", "policy", "water", "design", "network", "season",
           "garden", "history", "science", "travel", "music", "budget", "council", "harbour", "forest")
_SYLLABLES = ("ka", "zo", "ri", "mu", "te", "vo", "qa", "ly", "xe", "pu", "dra", "fen", "gor", "hul")

Op = tuple  # ("ingest", doc, kind) | ("delete", doc) | ("retrieve", doc, mode, filter) | ("repair", action)


@dataclass
class Step:
    ops: list[Op]
    storage: float = 0.0  # failure rate of plugin-storage calls during the step
    vectors: float = 0.0  # failure rate of vector calls during the step
    lost: float = 0.0  # rate of vector calls the host does but whose answer is lost
    kill_after: int | None = None  # kill -9 after this many host calls of the step
    restart: bool = False  # a new plugin process after the step

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in (("storage", self.storage), ("vectors", self.vectors),
                        ("lost", self.lost), ("kill_after", self.kill_after), ("restart", self.restart)) if v)
        return f"Step({self.ops!r}{extra})"


@dataclass
class History:
    seed: int
    backend: str
    steps: list[Step]


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


# ---------------------------------------------------------------------- documents
def doc_id(n: int) -> str:
    return f"doc-{n:03d}"


def doc_words(n: int) -> list[str]:
    rng = random.Random(f"words-{n}")
    tag = "".join("abcdefghij"[int(d)] for d in str(n))
    return ["".join(rng.choice(_SYLLABLES) for _ in range(2)) + "x" + tag + "q" + rng.choice(_SYLLABLES)
            for _ in range(3)]


def doc_bytes(n: int, kind: str) -> bytes:
    if kind == "bad":
        return b""
    rng = random.Random(f"text-{n}")
    words = doc_words(n)
    paragraphs = 1 if kind == "small" else 6
    out = []
    for _ in range(paragraphs):
        # the file's own words dominate its chunks, so that the hashing embedding finds them
        body = [rng.choice(_FILLER) for _ in range(12 if kind == "small" else 50)]
        for w in words * (2 if kind == "small" else 6):
            body.insert(rng.randrange(len(body)), w)
        out.append(" ".join(body) + ".")
    return "\n\n".join(out).encode()


@functools.lru_cache(maxsize=1024)
def expected_chunks(n: int, kind: str) -> int:
    document = parse_file(doc_bytes(n, kind), f"{doc_id(n)}.txt", "text/plain")
    return len(chunk_document(document, parse_creation_settings(SETTINGS)).chunks)


# ---------------------------------------------------------------------- generation
def generate(seed: int) -> History:
    rng = random.Random(seed)
    # drawn apart, so that each seed's other steps stay what they were before lost answers
    lost_rng = random.Random(f"lost-{seed}")
    steps: list[Step] = []
    ingested: list[int] = []
    next_doc = 0
    for _ in range(rng.randint(8, 16)):
        ops: list[Op] = []
        for _ in range(rng.choice((1, 1, 2, 2, 3))):
            roll = rng.random()
            if roll < 0.4 or not ingested:
                ops.append(("ingest", next_doc, rng.choice(("small", "small", "medium", "bad"))))
                next_doc += 1
            elif roll < 0.6:
                ops.append(("delete", rng.choice(ingested)))
            elif roll < 0.93:
                filt = rng.choice(("none", "none", "file", "not-file"))
                ops.append(("retrieve", rng.choice(ingested), rng.choice(MODES), filt))
            else:
                ops.append(("repair", rng.choice(REPAIRS)))
        ingested += [op[1] for op in ops if op[0] == "ingest"]
        step = Step(ops)
        if rng.random() < 0.3:
            step.storage = rng.choice((0.3, 0.5, 1.0))
        if rng.random() < 0.15:
            step.vectors = rng.choice((0.2, 0.5))
        if lost_rng.random() < 0.15:
            step.lost = lost_rng.choice((0.2, 0.5))
        if rng.random() < 0.12:
            step.kill_after = rng.randint(1, 40)
        elif rng.random() < 0.1:
            step.restart = True
        steps.append(step)
    return History(seed, BACKENDS[seed % len(BACKENDS)], steps)


# ---------------------------------------------------------------------- LangBot's side
@dataclass
class DocState:
    kind: str
    status: str = "new"  # completed | failed | interrupted | deleted | removed | delete-failed
    chunks: int = 0


@dataclass
class Book:
    docs: dict[int, DocState] = field(default_factory=dict)

    def gone(self) -> set[str]:
        """Files that must never be returned again."""
        return {doc_id(n) for n, d in self.docs.items() if d.status in ("deleted", "failed", "removed")}

    def known(self) -> set[str]:
        return {doc_id(n) for n in self.docs}


# ---------------------------------------------------------------------- running
class Runner:
    def __init__(self, history: History) -> None:
        self.history = history
        self.rng = random.Random(history.seed * 7919 + 1)
        self.host = make_host(history.backend)
        self.faults = Faults(self.rng)
        self.book = Book()
        self.process = self._new_process()
        self.calls: Counter[str] = Counter()

    def _new_process(self) -> PluginProcess:
        process = PluginProcess(self.host, self.faults, self.rng, KB)
        self.component = LucidRag()
        self.component.plugin = process  # type: ignore[assignment]
        return process

    async def _invoke(self, name: str, limit: float, hook: Callable[..., Awaitable[T]], *args: Any) -> T:
        """As the runtime calls a hook: bound to an invocation, in the workspace's blocking scope.
        Raises HistoryFailed if the hook raised (other than being killed) or outlived `limit`."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            with bind_invocation(self.host.plugin_runtime_handler, config={}, binding=None):
                with blocking_work_scope("sim"):
                    return await hook(*args)
        except Killed:
            raise
        except ConsoleError:
            raise
        except Exception as error:  # noqa: BLE001 - the invariant
            raise HistoryFailed(Violation("raised", f"{name} raised {type(error).__name__}: {error}")) from error
        finally:
            elapsed = loop.time() - started
            if elapsed > limit:
                raise HistoryFailed(Violation("raised", f"{name} took {elapsed:.1f} s (LangBot allows {limit} s)"))

    async def run(self) -> None:
        with inline_blocking():
            await self._invoke("on_knowledge_base_create", HOOK_TIMEOUT_S["create"],
                               self.component.on_knowledge_base_create, KB, dict(SETTINGS))
            for number, step in enumerate(self.history.steps):
                await self._step(number, step)
            await self._settle()

    async def _step(self, number: int, step: Step) -> None:
        self.faults.storage, self.faults.vectors, self.faults.lost = step.storage, step.vectors, step.lost
        self.process.kill_after = step.kill_after
        healthy = not step.storage and not step.vectors and not step.lost
        ops = [op for op in step.ops if self._allowed(op)]
        for op in ops:
            if op[0] == "ingest":
                self.book.docs[op[1]] = DocState(op[2])
        results = await asyncio.gather(*(self._op(op, healthy) for op in ops), return_exceptions=True)
        for op, result in zip(ops, results):
            if isinstance(result, HistoryFailed):
                raise HistoryFailed(Violation(result.violation.kind, f"step {number} {op}: {result.violation.detail}"))
            if isinstance(result, Killed):
                if op[0] == "ingest":
                    self.book.docs[op[1]].status = "interrupted"
                elif op[0] == "delete":
                    self.book.docs[op[1]].status = "delete-failed"
            elif isinstance(result, BaseException):
                raise result
        self._check_collection(f"step {number}")
        self.faults.storage = self.faults.vectors = self.faults.lost = 0.0
        if self.process.dead or step.restart:
            self.process.kill()
            self.process = self._new_process()

    def _allowed(self, op: Op) -> bool:
        """What LangBot lets the operator do: delete a file that finished (completed or failed,
        or whose delete failed); the console removes an interrupted file's vectors."""
        if op[0] == "ingest":
            return op[1] not in self.book.docs
        if op[0] == "delete":
            doc = self.book.docs.get(op[1])
            return doc is not None and doc.status in ("completed", "failed", "delete-failed")
        return True

    async def _op(self, op: Op, healthy: bool) -> None:
        if op[0] == "ingest":
            await self._ingest(op[1], op[2], healthy)
        elif op[0] == "delete":
            await self._delete(op[1])
        elif op[0] == "retrieve":
            await self._retrieve(op[1], op[2], op[3])
        elif op[0] == "repair":
            await self._repair(op[1])

    async def _ingest(self, n: int, kind: str, healthy: bool) -> None:
        storage_path = f"v1/{KB}/{doc_id(n)}.txt"
        data = doc_bytes(n, kind)
        self.host.files[storage_path] = data
        context = ingestion_context(KB, storage_path, data, doc_id(n), dict(SETTINGS), "text/plain")
        result = await self._invoke("ingest", HOOK_TIMEOUT_S["ingest"], self.component.ingest, context)
        doc = self.book.docs[n]
        if result.status == DocumentStatus.COMPLETED:
            doc.status, doc.chunks = "completed", result.chunks_created
        else:
            doc.status = "failed"
            if kind != "bad" and healthy:
                raise HistoryFailed(Violation("failed-healthy", f"{doc_id(n)}: {result.error_message}"))

    async def _delete(self, n: int) -> None:
        ok = await self._invoke("delete_document", HOOK_TIMEOUT_S["delete"],
                                self.component.delete_document, KB, doc_id(n))
        self.book.docs[n].status = "deleted" if ok is True else "delete-failed"

    async def _retrieve(self, n: int, mode: str, filt: str, top_k: int = 5) -> list[str]:
        filters: dict[str, Any] = {}
        if filt == "file":
            filters = {"file_id": doc_id(n)}
        elif filt == "not-file":
            filters = {"file_id": {"$ne": doc_id(n)}}
        context = RetrievalContext(query=" ".join(doc_words(n)), knowledge_base_id=KB, collection_id=KB,
                                   retrieval_settings={"top_k": top_k, "search_mode": mode},
                                   creation_settings=dict(SETTINGS), filters=filters)
        response = await self._invoke("retrieve", HOOK_TIMEOUT_S["retrieve"], self.component.retrieve, context)
        files = [str((entry.metadata or {}).get("file_id")) for entry in response.results]
        back = sorted(set(files) & self.book.gone())
        if back:
            states = {f: self.book.docs[int(f.split("-")[1])].status for f in back}
            raise HistoryFailed(Violation("returned-gone", f"retrieve {mode} returned {states}"))
        unknown = sorted(set(files) - self.book.known())
        if unknown:
            raise HistoryFailed(Violation("returned-gone", f"retrieve {mode} returned unknown files {unknown}"))
        return files

    async def _repair(self, action: str, file_id: str = "") -> None:
        console = Console(self.process, self.process.engine, "dedicated")  # type: ignore[arg-type]
        try:
            await self._invoke("console", HOOK_TIMEOUT_S["retrieve"], console.handle, "/repair",
                               {"kb_id": KB, "action": action, "file_id": file_id})
        except ConsoleError:
            pass  # shown to the operator; a failure under faults is fine

    # ------------------------------------------------------------------ invariants
    def _check_collection(self, where: str) -> None:
        dim = self.host.dims.get(KB)
        if dim is not None and dim != SIM_DIM:
            raise HistoryFailed(Violation("wrong-collection", f"{where}: the collection has dimension {dim}"))

    async def _settle(self) -> None:
        self.faults.storage = self.faults.vectors = self.faults.lost = 0.0
        self.process.kill()
        self.process = self._new_process()
        for n, doc in sorted(self.book.docs.items()):
            if doc.status == "delete-failed":  # LangBot kept the file; the operator deletes it again
                await self._delete(n)
                if doc.status != "deleted":
                    raise HistoryFailed(Violation("raised", f"deleting {doc_id(n)} on a healthy host failed"))
        completed = sorted(n for n, d in self.book.docs.items() if d.status == "completed")
        probe = completed[0] if completed else 0
        for _ in range(SETTLE_HOOKS):
            await self._retrieve(probe, "hybrid", "none")
        for n in completed:
            for mode in ("vector", "keyword"):
                if doc_id(n) not in await self._retrieve(n, mode, "none"):
                    raise HistoryFailed(Violation("not-found", f"{doc_id(n)} ({self.book.docs[n].kind}) "
                                                               f"not found in {mode} mode after the settle"))
        self._check_vectors()
        self._check_keys()

    def _check_vectors(self) -> None:
        per_file = Counter(str(m.get("file_id")) for m in self.host.vectors_of(KB))
        for file_id, count in sorted(per_file.items()):
            n = int(file_id.split("-")[1]) if file_id.startswith("doc-") else -1
            doc = self.book.docs.get(n)
            status = doc.status if doc else "unknown"
            if status in ("deleted", "failed", "removed", "unknown", "new"):
                raise HistoryFailed(Violation("stray-vectors", f"{count} vectors of {status} file {file_id}"))
            want = doc.chunks if status == "completed" else expected_chunks(n, doc.kind)
            if status in ("completed", "interrupted") and count != want:
                raise HistoryFailed(Violation("stray-vectors",
                                              f"{status} file {file_id} has {count} of {want} vectors"))

    def _check_keys(self) -> None:
        keys = [k for k in self.host.storage if k.startswith(kb_prefix(KB))]
        groups = group_keys(keys)
        with_vectors = {str(m.get("file_id")) for m in self.host.vectors_of(KB)}
        stray = [f"file/{f}" for f in groups.get((KB, "file"), ()) if f not in with_vectors]
        stray += [f"journal/{f}" for f in groups.get((KB, "journal"), ())]
        manifest = self.host.storage.get(index_manifest_key(KB))
        live = set(SegmentIndex.manifest_segment_names(manifest)) if manifest else set()
        stray += [f"kw/seg/{s}" for s in groups.get((KB, "kw/seg"), ()) if s not in live]
        if stray:
            raise HistoryFailed(Violation("stray-keys", f"{sorted(stray)[:5]} ({len(stray)} in all)"))


def run_history(history: History) -> Violation | None:
    """Run one history on a new event loop; the first violation, or None."""
    saved = lucidrag.base.host.RETRY_DELAYS
    lucidrag.base.host.RETRY_DELAYS = (0.0, 0.0, 0.0)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(Runner(history).run())
        return None
    except HistoryFailed as failed:
        return failed.violation
    finally:
        lucidrag.base.host.RETRY_DELAYS = saved
        _cancel_all(loop)
        loop.close()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


def shrink(history: History, violation: Violation, budget_s: float = 120.0) -> History:
    """Drop steps, then operations, then faults, while the history still fails the same way."""
    deadline = time.monotonic() + budget_s

    def fails(candidate: History) -> bool:
        found = run_history(candidate)
        return found is not None and found.kind == violation.kind

    current = history
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for i in range(len(current.steps) - 1, -1, -1):
            candidate = History(current.seed, current.backend, current.steps[:i] + current.steps[i + 1:])
            if fails(candidate):
                current, changed = candidate, True
        for i, step in enumerate(current.steps):
            for j in range(len(step.ops) - 1, -1, -1):
                if len(step.ops) == 1:
                    break
                smaller = dataclasses.replace(step, ops=step.ops[:j] + step.ops[j + 1:])
                candidate = History(current.seed, current.backend,
                                    current.steps[:i] + [smaller] + current.steps[i + 1:])
                if fails(candidate):
                    current, step, changed = candidate, smaller, True
    return current
