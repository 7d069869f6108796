"""The one way LucidRAG runs CPU-heavy work (parsing, chunking) off the event loop.

`lbp run` installs the SDK's bounded default executor (langbot_plugin/runtime/bounded_executor.py:
8 workers, at most 4 jobs in flight per workspace) and runs every action inside
`blocking_work_scope(workspace)`; a submission over the limit raises `BlockingWorkCapacityError`
at once instead of queueing. LangBot does not queue ingestions (8 per workspace run at once), so a
bare `asyncio.to_thread` fails the 5th concurrent upload. Here a job first waits for one of our
own slots (fewer than the per-workspace limit, leaving room for the SDK's message encoding, which
runs in the same scope), then submits, and if the executor is still full it waits and tries again.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

JOBS_PER_SCOPE = 2  # below the SDK's 4 per workspace
_FIRST_RETRY_S = 0.01
_MAX_RETRY_S = 0.25

try:  # SDK >= 0.7.17
    from langbot_plugin.runtime.bounded_executor import (
        BlockingWorkCapacityError,
        current_blocking_work_scope,
    )
except ImportError:  # an SDK without the bounded executor: to_thread never refuses
    class BlockingWorkCapacityError(RuntimeError):  # type: ignore[no-redef]
        pass

    def current_blocking_work_scope() -> str | None:  # type: ignore[misc]
        return None

# asyncio primitives belong to one loop; the plugin has one, tests start a new one per test.
_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str | None, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


def _slot(scope: str | None) -> asyncio.Semaphore:
    per_loop = _slots.setdefault(asyncio.get_running_loop(), {})
    semaphore = per_loop.get(scope)
    if semaphore is None:
        semaphore = per_loop[scope] = asyncio.Semaphore(JOBS_PER_SCOPE)
    return semaphore


async def run_blocking(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Run `fn(*args, **kwargs)` in a worker thread, waiting for capacity instead of failing."""
    async with _slot(current_blocking_work_scope()):
        delay = _FIRST_RETRY_S
        while True:
            try:
                return await asyncio.to_thread(fn, *args, **kwargs)
            except BlockingWorkCapacityError:
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_RETRY_S)
