"""CPU-heavy work off the event loop, within the plugin runtime's bounded executor.

`lbp run` installs a bounded default executor (8 workers, at most 4 jobs in flight per workspace)
and a fifth concurrent `asyncio.to_thread` raises `BlockingWorkCapacityError` at once. LangBot
starts up to 8 ingestions at a time, so we wait for capacity instead of failing the file.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
_FIRST_WAIT_S = 0.01
_MAX_WAIT_S = 0.25


def _is_capacity_error(error: BaseException) -> bool:
    return any(cls.__name__ == "BlockingWorkCapacityError" for cls in type(error).__mro__)


async def run_blocking(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    wait = _FIRST_WAIT_S
    while True:
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except RuntimeError as error:
            if not _is_capacity_error(error):
                raise
            await asyncio.sleep(wait)
            wait = min(wait * 2, _MAX_WAIT_S)
