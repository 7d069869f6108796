"""The simulated LangBot host of the seeded histories: one host (a contract-following FakeHost:
its plugin storage and vector DB outlive plugin processes) and the plugin processes over it.

Time is virtual (`SimLoop`): when nothing is ready to run and no worker thread is busy, the clock
jumps to the next timer, so a host call that hangs for the SDK's 15-60 s call timeout, LangBot's
30 s / 1200 s hook timeouts, the plugin's own deadlines (lucidrag.base.budget) and its retry
back-offs all fire as they would, in no wall-clock time. The plugin's `time.monotonic()` reads
the same clock (`virtual_time`).

A `PluginProcess` is what the component sees as `self.plugin`: the host API plus an Engine of its
own. Every host call of a process goes through `_host`, which
- refuses a call made after the hook that issued it returned, before the request and again when
  the answer arrives (the SDK's `invocation_capability(...).require_active()`); the host still
  does a call whose answer is refused;
- waits a seeded jitter of 0-8 event-loop turns, so that concurrent hooks interleave differently
  per seed but reproducibly;
- hands the call to LangBot as a task of its own (`landings`): once sent, it is done whatever
  happens to the caller, as LangBot runs each action in its own task and the SDK never cancels
  it (`cancel_peer_on_cancel` is False). A caller that gives up (a deadline of the plugin's, the
  SDK's call timeout) leaves the call to land later;
- on the seeded fault schedule of the moment (`Faults`): refuses plugin-storage and vector calls,
  loses the answer of a call the host did (the plugin gets ActionCallTimeoutError after the SDK's
  call timeout), or makes the host slow: the call takes up to twice the SDK's timeout, so it may
  land long after the plugin was told it timed out;
- refuses storage writes and deletes that LangBot did all the same (`landed`: the answer is lost,
  the plugin is told it failed), in an outage of some storage calls or one from before a KB's
  creation until the process is replaced (`writes_refused`);
- waits a seeded jitter of virtual time too (`jitter_s`, 0-8 ms in generated histories);
- models kill -9: once the process is killed, none of its host calls ever returns to it (they
  raise `Killed`, a BaseException the plugin cannot catch by accident); the call that kills it
  may or may not have reached the host (a seeded coin; never one the host refuses for good: a
  storage write on a host whose storage writes all fail). A kill at a moment of virtual time
  (`kill`, from a timer) stops the process at whatever await it is in: no call it makes or has in
  flight returns to it afterwards.

Blocking work (parsing, chunking) runs inline on the loop (`inline_blocking`, so that a seed
replays exactly) or in real worker threads of the SDK's bounded executor (`threaded_blocking`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import random
import selectors
import sys
import threading
import time
import types
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from langbot_plugin.api.proxies.invocation import invocation_capability

import lucidrag.console
from lucidrag.base import workers
import lucidrag.state.kbdelete
import lucidrag.state.journals
import lucidrag.vectors.vectorscan
from lucidrag.engine import Engine
from tests.fakes import ActionCallTimeoutError, FakeHost, HostError, hash_embed

# the wall clock at virtual time 0 (`time.time()`): fixed, as what a file is named after (its
# upload time) shapes its record and its chunks, and a seed must replay exactly
SIM_EPOCH = float(os.environ.get("LUCIDRAG_SIM_EPOCH", "1765000000"))
SIM_DIM = 256  # != Milvus' default 1536: a collection created by touching it refuses our vectors
MAX_JITTER_TURNS = 8
ROUND_TRIP_S = (0.002, 0.02)  # virtual time a host call takes, answered or refused
# Milvus' query window (offset + limit <= 16384, pages of 500), scaled down so that a file of a
# few dozen chunks is past it: the plugin's constants and the fake Milvus' window together.
SIM_LIST_PAGE = 4
SIM_LIST_WINDOW = 16

STORAGE_METHODS = frozenset({"get_plugin_storage", "set_plugin_storage", "delete_plugin_storage",
                             "get_plugin_storage_keys"})
VECTOR_METHODS = frozenset({"vector_upsert", "vector_search", "vector_delete", "vector_list"})
LANDING_METHODS = frozenset({"set_plugin_storage", "delete_plugin_storage"})  # refused, yet maybe done
# The SDK's call timeouts (api/proxies/langbot_api.py; Handler.call_action defaults to 15 s)
SDK_TIMEOUT_S: dict[str, float] = {"invoke_embedding": 60.0, "vector_upsert": 60.0, "vector_search": 30.0,
                                   "vector_delete": 30.0, "vector_list": 30.0}
SDK_DEFAULT_TIMEOUT_S = 15.0
BACKENDS = ("chroma", "milvus", "pgvector")


class Killed(BaseException):
    """The plugin process was killed (kill -9): this host call never returns to it."""


class Deadlock(Exception):
    """Nothing can ever run again: every task waits for something no one will do."""


def sim_embed(text: str) -> list[float]:
    return hash_embed(text, SIM_DIM)


def make_host(backend: str) -> FakeHost:
    if backend == "milvus":
        return FakeHost.milvus(embed=sim_embed, list_window=SIM_LIST_WINDOW)
    if backend == "pgvector":
        return FakeHost.pgvector(embed=sim_embed)
    return FakeHost(embed=sim_embed)


# ---------------------------------------------------------------------- virtual time
class _VirtualSelector:
    """The loop's selector: polls without waiting, and moves the loop's clock to the next timer
    instead of sleeping; waits for real only while a worker thread is busy."""

    def __init__(self, real: selectors.BaseSelector, loop: SimLoop) -> None:
        self._real = real
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[Any]:
        if self._loop.threads:
            return self._real.select(timeout if timeout is None or timeout <= 0 else None)
        events = self._real.select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            raise Deadlock("every task waits and no timer is due")
        self._loop.now += timeout
        return events

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class SimLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.threads = 0  # blocking jobs running in worker threads right now
        self._selector = _VirtualSelector(self._selector, self)  # type: ignore[assignment]

    def time(self) -> float:
        return self.now


class _Clock(types.ModuleType):
    """The `time` module as the plugin sees it: monotonic() and time() read the loop's clock."""

    def __init__(self, loop: SimLoop) -> None:
        super().__init__("time")
        self._loop = loop
        self._epoch = SIM_EPOCH

    def monotonic(self) -> float:
        return self._loop.now

    def time(self) -> float:
        return self._epoch + self._loop.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@contextlib.contextmanager
def virtual_time(loop: SimLoop) -> Iterator[None]:
    """Every plugin module reads `time` from the loop's virtual clock while inside."""
    clock = _Clock(loop)
    patched = [m for name, m in list(sys.modules.items())
               if name.startswith(("lucidrag", "components")) and getattr(m, "time", None) is time]
    for module in patched:
        module.time = clock  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module in patched:
            module.time = time  # type: ignore[attr-defined]


@contextlib.contextmanager
def small_listing_window() -> Iterator[None]:
    modules = (lucidrag.vectors.vectorscan, lucidrag.console, lucidrag.state.journals, lucidrag.state.kbdelete)
    saved = [(m, {k: getattr(m, k) for k in ("LIST_PAGE", "LIST_WINDOW") if hasattr(m, k)}) for m in modules]
    for module, names in saved:
        for name in names:
            setattr(module, name, SIM_LIST_PAGE if name == "LIST_PAGE" else SIM_LIST_WINDOW)
    try:
        yield
    finally:
        for module, names in saved:
            for name, value in names.items():
                setattr(module, name, value)


@contextlib.contextmanager
def inline_blocking() -> Iterator[None]:
    """`asyncio.to_thread` (and a parse worker's job) runs the function on the loop after one turn: the
    same awaits as a worker thread, without the thread's timing, so that a seed replays exactly."""

    async def inline(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return fn(*args, **kwargs)

    with _blocking_work_as(inline):
        yield


@contextlib.contextmanager
def threaded_blocking(loop: SimLoop) -> Iterator[None]:
    """`asyncio.to_thread` (and a parse worker's job) in real worker threads (the loop's executor); the
    virtual clock stands still while one runs."""
    original = asyncio.to_thread

    async def threaded(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        loop.threads += 1
        try:
            return await original(fn, *args, **kwargs)
        finally:
            loop.threads -= 1

    with _blocking_work_as(threaded):
        yield


@contextlib.contextmanager
def _blocking_work_as(run: Callable[..., Any]) -> Iterator[None]:
    original, original_run_job = asyncio.to_thread, workers.run_job
    asyncio.to_thread = run  # type: ignore[assignment]
    workers.run_job = lambda job: run(job.fn, *job.args)  # type: ignore[assignment] # no processes
    try:
        yield
    finally:
        asyncio.to_thread = original  # type: ignore[assignment]
        workers.run_job = original_run_job  # type: ignore[assignment]


@contextlib.contextmanager
def busy_thread(on: bool) -> Iterator[None]:
    """With `on`, a thread that keeps a core (and the GIL) busy while inside: CPU contention, which
    shifts when worker threads finish against the loop (only `threaded_blocking` histories feel it)."""
    if not on:
        yield
        return
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(i * i for i in range(2000))

    thread = threading.Thread(target=spin, name="sim-busy", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


# ---------------------------------------------------------------------- faults
class Faults:
    """The failure rates of the moment; each call draws from the history's seeded stream."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.storage = 0.0
        self.storage_methods = STORAGE_METHODS  # the storage calls `storage` applies to (an outage of some)
        self.vectors = 0.0
        self.lost = 0.0  # storage and vector calls the host does, whose answer never comes back
        self.slow = 0.0  # storage and vector calls the host takes up to twice the SDK's timeout for
        # storage writes and deletes refused, which LangBot did all the same (only the answer is lost)
        self.landed = 0.0
        self.writes_fail = False  # every plugin-storage write refused (LangBot on SQLAlchemy 2.1)
        # every plugin-storage write refused until the process is replaced (an outage from before
        # the KB's creation on); `landed` of them done all the same
        self.writes_refused = False
        self.creation_landed = 0.0

    def clear(self) -> None:
        self.storage = self.vectors = self.lost = self.slow = self.landed = 0.0
        self.storage_methods = STORAGE_METHODS

    def always_refuses(self, method: str) -> bool:
        return self.writes_fail and method == "set_plugin_storage"

    def fate(self, method: str) -> str:
        """"ok", "lost", "slow" or "landed" (refused, but done: the caller raises after it lands);
        raises for a call the host refuses and does not do."""
        if self.always_refuses(method):
            raise HostError("set_plugin_storage: TenantUnitOfWork does not allow an unknown ON CONFLICT update shape")
        if self.writes_refused and method == "set_plugin_storage":
            if self.creation_landed and self.rng.random() < self.creation_landed:
                return "landed"
            raise HostError("set_plugin_storage: TenantUnitOfWork does not allow an unknown ON CONFLICT update shape")
        rate = (self.storage if method in self.storage_methods else 0.0) if method in STORAGE_METHODS \
            else self.vectors if method in VECTOR_METHODS else 0.0
        if rate and self.rng.random() < rate:
            if self.landed and method in LANDING_METHODS and self.rng.random() < self.landed:
                return "landed"
            # storage errors are not transient; vector errors sometimes are (then retried)
            transient = method in VECTOR_METHODS and self.rng.random() < 0.5
            raise HostError(f"{method}: {'503 Unknown error' if transient else 'simulated failure'}")
        if method not in STORAGE_METHODS | VECTOR_METHODS:
            return "ok"
        if self.lost and self.rng.random() < self.lost:
            return "lost"
        if self.slow and self.rng.random() < self.slow:
            return "slow"
        return "ok"


# ---------------------------------------------------------------------- plugin processes
class PluginProcess:
    """One plugin process over the shared host: the host API as the component calls it, its own
    Engine, and a kill switch."""

    def __init__(self, host: FakeHost, faults: Faults, rng: random.Random, live_kbs: Callable[[], list[str]],
                 landings: set[asyncio.Task[Any]], vector_writes_due: Counter[str], jitter_s: float = 0.0) -> None:
        self.host = host
        self.vector_writes_due = vector_writes_due  # per collection: upserts sent, not yet done by LangBot
        self.jitter_s = jitter_s  # each host call first waits up to this long (virtual time)
        self.faults = faults
        self.rng = rng
        self.live_kbs = live_kbs
        self.landings = landings
        self.engine = Engine()
        self.dead = False
        self.kill_after: int | None = None  # host calls until kill -9 (None: never)
        self.plugin_runtime_handler = host.plugin_runtime_handler

    def kill(self) -> None:
        self.dead = True

    def _send(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], delay: float) -> asyncio.Task[Any]:
        """The call as LangBot runs it: in a task of its own, outside the plugin's invocation. It
        takes effect at a seeded moment within `delay` and answers at its end, so a listing or a
        read answers what storage held some time before the answer arrives."""
        call: Callable[..., Any] = getattr(self.host, method)
        effect_at = self.rng.uniform(0.0, delay)
        upsert_to = kwargs.get("collection_id") if method == "vector_upsert" else None
        if upsert_to is not None:
            self.vector_writes_due[upsert_to] += 1

        async def land() -> Any:
            await asyncio.sleep(effect_at)
            try:
                result = await call(*args, **kwargs)
            finally:
                if upsert_to is not None:
                    self.vector_writes_due[upsert_to] -= 1
            await asyncio.sleep(delay - effect_at)
            return result

        task = asyncio.get_running_loop().create_task(land(), context=contextvars.Context())
        self.landings.add(task)
        task.add_done_callback(self.landings.discard)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved: no warning
        return task

    async def _host(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self.dead:
            raise Killed()
        invocation = invocation_capability(self.plugin_runtime_handler)  # raises once the hook returned
        for _ in range(self.rng.randint(0, MAX_JITTER_TURNS)):
            await asyncio.sleep(0)
        if self.jitter_s:
            await asyncio.sleep(self.rng.uniform(0.0, self.jitter_s))
        if self.dead:
            raise Killed()
        if invocation is not None:
            invocation.require_active()
        if self.kill_after is not None:
            self.kill_after -= 1
            if self.kill_after <= 0:
                self.dead = True
                # the host did it (unless it refuses every such call); the answer never came back
                if self.rng.random() < 0.5 and not self.faults.always_refuses(method):
                    self._send(method, args, kwargs, 0.0)
                raise Killed()
        round_trip = self.rng.uniform(*ROUND_TRIP_S)
        try:
            fate = self.faults.fate(method)
        except HostError:
            await asyncio.sleep(round_trip)
            raise
        if fate == "landed":  # LangBot did it, and answers as if it had refused
            await asyncio.shield(self._send(method, args, kwargs, round_trip))
            if self.dead:
                raise Killed()
            raise HostError(f"{method}: simulated failure")
        timeout = SDK_TIMEOUT_S.get(method, SDK_DEFAULT_TIMEOUT_S)
        delay = self.rng.uniform(0.0, 2 * timeout) if fate == "slow" else round_trip
        landing = self._send(method, args, kwargs, delay)
        try:
            result = await asyncio.wait_for(asyncio.shield(landing), timeout)
            if fate == "lost":
                await asyncio.sleep(timeout - delay)
        except asyncio.TimeoutError:
            fate = "lost"
        if self.dead:
            raise Killed()
        if invocation is not None:
            invocation.require_active()
        if fate == "lost":
            raise ActionCallTimeoutError(f"{method}: the action call timed out")
        return result

    # ---------------------------------------------------------------- the SDK's host API
    async def invoke_embedding(self, embedding_model_uuid: str, texts: list[str]) -> list[list[float]]:
        return await self._host("invoke_embedding", embedding_model_uuid, texts)

    async def invoke_rerank(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return await self._host("invoke_rerank", *args, **kwargs)

    async def vector_upsert(self, *args: Any, **kwargs: Any) -> None:
        return await self._host("vector_upsert", *args, **kwargs)

    async def vector_search(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return await self._host("vector_search", *args, **kwargs)

    async def vector_delete(self, *args: Any, **kwargs: Any) -> int:
        return await self._host("vector_delete", *args, **kwargs)

    async def vector_list(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return await self._host("vector_list", *args, **kwargs)

    async def get_knowledge_file_stream(self, storage_path: str) -> bytes:
        return await self._host("get_knowledge_file_stream", storage_path)

    async def set_plugin_storage(self, key: str, value: bytes) -> None:
        return await self._host("set_plugin_storage", key, value)

    async def get_plugin_storage(self, key: str) -> bytes:
        return await self._host("get_plugin_storage", key)

    async def get_plugin_storage_keys(self) -> list[str]:
        return await self._host("get_plugin_storage_keys")

    async def delete_plugin_storage(self, key: str) -> None:
        return await self._host("delete_plugin_storage", key)

    async def list_knowledge_bases(self) -> list[dict[str, Any]]:
        return [{"uuid": kb, "name": kb, "description": ""} for kb in self.live_kbs()]
