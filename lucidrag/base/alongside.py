"""Work that runs beside a hook's own and ends with it.

The SDK (0.7.18, api/proxies/invocation.py) refuses every host call of a task that outlives the
hook that started it, so nothing may be left running when a hook returns. Yet some work is worth
doing while any hook runs: reading a big keyword index after a restart (state/snapshotload.py)
should go on while queries are answered from the vectors. `hook_scope` opens such a scope for
one hook; `beside` starts a task in it (one per key); when the hook's own work is done the scope
cancels what still runs and waits for it, so the hook returns with nothing of it left behind.
The tasks inherit the hook's context: its invocation and its deadline (base/budget.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

logger = logging.getLogger(__name__)

_scope: ContextVar[dict[str, asyncio.Task[Any]] | None] = ContextVar("lucidrag_hook_scope", default=None)


@asynccontextmanager
async def hook_scope() -> AsyncIterator[None]:
    """Tasks started by `beside` inside run until the block ends, then are cancelled. Nested
    scopes share the outer one."""
    if _scope.get() is not None:
        yield
        return
    tasks: dict[str, asyncio.Task[Any]] = {}
    token = _scope.set(tasks)
    try:
        yield
    finally:
        _scope.reset(token)
        running = list(tasks.values())
        for task in running:
            task.cancel()
        for task, outcome in zip(running, await asyncio.gather(*running, return_exceptions=True)):
            if isinstance(outcome, Exception):
                logger.warning("work beside the request stopped (%s: %s)", task.get_name(), outcome)


def beside(key: str, work: Callable[[], Coroutine[Any, Any, Any]]) -> bool:
    """Start `work()` beside the current hook unless work under `key` runs there already. Returns
    whether it runs (False outside a scope: then nothing is started)."""
    tasks = _scope.get()
    if tasks is None:
        return False
    running = tasks.get(key)
    if running is None or running.done():
        tasks[key] = asyncio.create_task(work(), name=key)
    return True
