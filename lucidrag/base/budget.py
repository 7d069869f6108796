"""How long each host hook may take, and the deadline every host call of a hook keeps to.

LangBot gives each hook a fixed time and then gives up on it without cancelling the plugin's work
(`cancel_peer_on_cancel` is False): a delete that finishes after its 30 s is shown to the operator
as failed ("file retained") although it happened. So a hook sets a deadline when it starts
(`hook_budget`), and every host call made under it (`bounded`, used by `host.with_retries` and by
the plugin-storage layer) is abandoned at that deadline, and not started once it has passed.
Work that did not fit stays as state (unsaved records, a dirty index, a pending KB deletion) and
is continued by later hooks' upkeep, each in a budget of its own (`budget`, nested: the tighter
deadline wins).

An ingest is the exception to "abandon at the deadline": once its vectors are written, the file
must end either committed or rolled back, never half way. So its time has three deadlines
(`IngestDeadlines`): its work (reading, parsing, embedding, writing vectors) stops at the first,
its commit's host calls and lock wait end at the second, and a rollback's at the third, which is
well within LangBot's 1200 s.

The deadline lives in a context variable, so tasks a hook starts (asyncio.gather) inherit it.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

# What the plugin runtime waits for each hook before giving up (langbot_plugin 0.7.18,
# runtime/io/handlers/plugin.py: rag_ingest_document timeout=1200, retrieve_knowledge
# KNOWLEDGE_RETRIEVAL_TIMEOUT = 120.0, rag_delete_document / rag_on_kb_create / rag_on_kb_delete
# timeout=30). LangBot 4.11.2 waits as long or longer on its side (retrieve 180 s).
HOOK_TIMEOUT_S: dict[str, float] = {
    "ingest": 1200.0,
    "retrieve": 120.0,
    "delete": 30.0,
    "create": 30.0,
    "kb_delete": 30.0,
    "console": 30.0,  # the runtime's page API request (the LucidRAG console)
    "tool": 180.0,  # an agent's tool call (runtime/io/handlers/plugin.py LONG_RUNNING_OPERATION_TIMEOUT)
}
# Share of a hook's time kept back from its host calls: the work after the last call (CPU, the
# answer's way back through the runtime) and a late answer that a call's own timeout allows.
HOOK_RESERVE = 0.2

# After an ingest's work stops (the component's limit), its commit has at least this long, and a
# rollback this long after the commit's deadline: an ingest answers by work + 70 s of its 1200 s.
INGEST_COMMIT_S = 20.0
INGEST_ROLLBACK_S = 50.0

_deadline: ContextVar[float] = ContextVar("lucidrag_hook_deadline", default=math.inf)


class BudgetSpent(Exception):
    """The hook's time for host calls is used up; the rest waits for a later hook."""


def deadline() -> float:
    """The monotonic time by which the current hook's host calls must be done (inf: none)."""
    return _deadline.get()


def remaining() -> float:
    return _deadline.get() - time.monotonic()


@contextmanager
def budget(seconds: float) -> Iterator[float]:
    """Host calls inside take at most `seconds` from now, and never past an enclosing deadline."""
    token = _deadline.set(min(_deadline.get(), time.monotonic() + seconds))
    try:
        yield _deadline.get()
    finally:
        _deadline.reset(token)


def hook_budget(hook: str, started: float | None = None) -> AbstractContextManager[float]:
    """The budget of one hook (a key of HOOK_TIMEOUT_S) that started at `started` (default: now)."""
    spent = 0.0 if started is None else time.monotonic() - started
    return budget(HOOK_TIMEOUT_S[hook] * (1.0 - HOOK_RESERVE) - spent)


@dataclass(frozen=True)
class IngestDeadlines:
    """Monotonic times by which an ingest's work, its commit and a rollback must be done."""

    work_s: float  # how long the work may take
    work: float
    commit: float
    rollback: float

    @classmethod
    def starting_now(cls, work_s: float) -> IngestDeadlines:
        work = time.monotonic() + work_s
        return cls(work_s, work, work + INGEST_COMMIT_S, work + INGEST_COMMIT_S + INGEST_ROLLBACK_S)


def until(when: float) -> AbstractContextManager[float]:
    """`budget` up to a monotonic time rather than for a number of seconds."""
    return budget(when - time.monotonic())


async def bounded(call: Callable[[], Awaitable[T]]) -> T:
    """Run one host call within the current deadline; BudgetSpent if it has passed or passes."""
    left = remaining()
    if left == math.inf:
        return await call()
    if left <= 0:
        raise BudgetSpent("this request's time is used up; the rest continues with later requests")
    try:
        return await asyncio.wait_for(call(), left)
    except asyncio.TimeoutError:
        if remaining() > 0:
            raise  # the call's own timeout, not ours
        raise BudgetSpent("a host call did not answer within this request's time") from None


@asynccontextmanager
async def holding(lock: asyncio.Lock) -> AsyncIterator[None]:
    """Hold `lock`, waiting for it no longer than the current deadline (BudgetSpent then): a hook
    queued behind a long commit or load answers in its time instead of past LangBot's."""
    left = remaining()
    try:
        if left == math.inf:
            await lock.acquire()
        else:
            async with asyncio.timeout(max(left, 0.0)):
                await lock.acquire()
    except TimeoutError:
        raise BudgetSpent("another change of this knowledge base did not finish within this "
                          "request's time") from None
    try:
        yield
    finally:
        lock.release()
