"""How LucidRAG runs CPU-heavy work off the event loop: in lanes, so that answering a question or
deleting a file never waits behind an upload. Reading an uploaded file (parsing, OCR) is not done
here but in worker processes of their own (base/workers.py): it never holds a runtime worker or a
workspace's executor slot.

`lbp run` installs the SDK's bounded default executor (langbot_plugin/runtime/bounded_executor.py:
8 workers, at most 4 jobs in flight per workspace) and runs every action inside
`blocking_work_scope(workspace)`; a submission over the limit raises `BlockingWorkCapacityError`
at once instead of queueing. LangBot does not queue ingestions (8 per workspace run at once).

    run_blocking(fn, ...)  everything else, in the SDK executor, at most SLOTS_PER_SCOPE jobs per
                           workspace (room for the SDK's message encoding, which runs in the same
                           scope); a job waits for a slot, then submits, and if the executor is
                           still full it waits and tries again. Inside `upload_work()` (an ingest's
                           own steps that nothing else waits for: chunking, building its record,
                           its vectors) a job takes at most UPLOAD_SLOTS_PER_SCOPE of them, so the
                           rest are always free for queries, deletes and the KB's shared state.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

SLOTS_PER_SCOPE = 2  # below the SDK's 4 per workspace
UPLOAD_SLOTS_PER_SCOPE = 1
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


@dataclass(frozen=True)
class _Slots:
    any_work: asyncio.Semaphore
    upload_work: asyncio.Semaphore


# asyncio primitives belong to one loop; the plugin has one, tests start a new one per test.
_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str | None, _Slots]] = (
    weakref.WeakKeyDictionary()
)
_uploading: contextvars.ContextVar[bool] = contextvars.ContextVar("lucidrag_upload_work", default=False)


def _slots_of(scope: str | None) -> _Slots:
    per_loop = _slots.setdefault(asyncio.get_running_loop(), {})
    slots = per_loop.get(scope)
    if slots is None:
        slots = per_loop[scope] = _Slots(asyncio.Semaphore(SLOTS_PER_SCOPE),
                                         asyncio.Semaphore(UPLOAD_SLOTS_PER_SCOPE))
    return slots


@contextlib.contextmanager
def upload_work() -> Iterator[None]:
    """`run_blocking` jobs started inside this block (and tasks created in it) are upload work.
    Only for work that nothing else waits for: a KB lock or index guard held meanwhile would make
    queries wait behind the upload lane."""
    token = _uploading.set(True)
    try:
        yield
    finally:
        _uploading.reset(token)


async def run_blocking(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Run `fn(*args, **kwargs)` in a worker thread, waiting for capacity instead of failing."""
    slots = _slots_of(current_blocking_work_scope())
    upload_slot = slots.upload_work if _uploading.get() else contextlib.nullcontext()
    async with upload_slot, slots.any_work:
        delay = _FIRST_RETRY_S
        while True:
            try:
                return await asyncio.to_thread(fn, *args, **kwargs)
            except BlockingWorkCapacityError:
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_RETRY_S)
