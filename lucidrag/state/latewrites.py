"""Writes of a file that may land after the plugin stopped waiting for them.

LangBot runs each host call in a task of its own and never cancels one the plugin gave up on (the
SDK's call timeout ran out, or a deadline of the plugin's cut the wait short): such an upsert may
write its vectors, and such a record save its record, long after the plugin removed the file.
`LateWrites` remembers, per file, that one of its writes went unanswered (and the vectors'
dimension, if known), so that removing the file leaves its journal entry "0 chunks" for the next
process (TOMBSTONED), whose `reconcile` removes whatever landed meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from lucidrag.base.budget import BudgetSpent
from lucidrag.base.host import is_connection_lost

T = TypeVar("T")


def answer_lost(error: BaseException) -> bool:
    """Whether a call that raised `error` may still have been done by LangBot: the SDK's call
    timed out, the plugin stopped waiting (a deadline, a cancellation) or the connection dropped,
    rather than LangBot refusing it."""
    if isinstance(error, (asyncio.CancelledError, BudgetSpent, TimeoutError)) or is_connection_lost(error):
        return True
    return any(cls.__name__ == "ActionCallTimeoutError" for cls in type(error).__mro__)


class LateWrites:
    def __init__(self) -> None:
        self._dims: dict[str, int | None] = {}  # file id -> the unanswered vectors' dimension

    async def send(self, file_id: str, dim: int | None, call: Callable[[], Awaitable[T]]) -> T:
        """One attempt of an upsert of `file_id`'s vectors (of dimension `dim`), remembered if
        its answer is lost."""
        try:
            return await call()
        except BaseException as error:
            if answer_lost(error):
                self.unanswered(file_id, dim)
            raise

    def unanswered(self, file_id: str, dim: int | None = None) -> None:
        """A write of the file failed in a way that may still land (plugin storage says no more
        than that a save failed: every failed record save counts)."""
        if dim is not None or file_id not in self._dims:
            self._dims[file_id] = dim

    def may_land(self, file_id: str) -> bool:
        return file_id in self._dims

    def dim(self, file_id: str) -> int | None:
        return self._dims.get(file_id)

    def left_to_next_process(self, file_id: str) -> None:
        """The file's entry "0 chunks" is durable: the next process removes what lands."""
        self._dims.pop(file_id, None)
