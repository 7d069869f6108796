"""Work that runs beside a hook's own and ends with it.

The SDK (0.7.18, api/proxies/invocation.py) refuses every host call of a task that outlives the
hook that started it, and drops the answer of a call still in flight when its hook ends. Yet some
work is worth doing while a hook runs: reading a big keyword index after a restart
(state/snapshotload.py) goes on while a query is answered from the vectors. `hook_scope` opens
such a scope for one hook and `beside` starts a task in it (one per key). When the hook's own
work is done, the scope tells the tasks to stop (`stopping`): they start no new call, and the
scope waits for the calls already made (at most DRAIN_S: an answer dropped is work LangBot did
for nothing) before it cancels what is left. So the hook returns with nothing of it running.
Work started with `drain=False` (writes that a later hook can simply repeat) is cancelled at once
instead: the hook never waits for it.
The tasks inherit the hook's context: its invocation and its deadline (base/budget.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

DRAIN_S = 0.5  # how long a hook waits, at most, for the calls its tasks have in flight


@dataclass
class _Scope:
    tasks: dict[str, asyncio.Task[Any]] = field(default_factory=dict)
    undrained: set[str] = field(default_factory=set)  # keys of tasks cancelled without a wait
    stop: bool = False


_scope: ContextVar[_Scope | None] = ContextVar("lucidrag_hook_scope", default=None)


@asynccontextmanager
async def hook_scope() -> AsyncIterator[None]:
    """Tasks started by `beside` inside run until the block ends, then finish what they have in
    flight (`stopping`) or are cancelled. Nested scopes share the outer one."""
    if _scope.get() is not None:
        yield
        return
    scope = _Scope()
    token = _scope.set(scope)
    try:
        yield
    finally:
        _scope.reset(token)
        scope.stop = True
        running = [t for t in scope.tasks.values() if not t.done()]
        for key in scope.undrained:
            scope.tasks[key].cancel()
        draining = [t for t in running if not t.cancelling()]
        if draining:
            await asyncio.wait(draining, timeout=DRAIN_S)
        for task in running:
            task.cancel()
        for task, outcome in zip(running, await asyncio.gather(*running, return_exceptions=True)):
            if isinstance(outcome, Exception):
                logger.warning("work beside the request stopped (%s: %s)", task.get_name(), outcome)


def beside(key: str, work: Callable[[], Coroutine[Any, Any, Any]], drain: bool = True) -> asyncio.Task[Any] | None:
    """Start `work()` beside the current hook unless work under `key` runs there already. Returns
    the task that runs it (None outside a scope, or once the hook is ending: nothing starts).
    With `drain=False` the hook's end cancels it without waiting for its calls in flight."""
    scope = _scope.get()
    if scope is None or scope.stop:
        return None
    running = scope.tasks.get(key)
    if running is None or running.done():
        running = scope.tasks[key] = asyncio.create_task(work(), name=key)
        if not drain:
            scope.undrained.add(key)
    return running


def stopping() -> bool:
    """Whether the hook this runs beside is ending: start no new host call."""
    scope = _scope.get()
    return scope is not None and scope.stop
