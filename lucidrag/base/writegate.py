"""Writes that must not land after a point in time: a knowledge base's, once its deletion starts.

LangBot deletes a KB while an upload into it may still be running. Each of the upload's writes
(a batch of vectors, a journal entry, the commit) runs inside `WriteGate.write`, which refuses to
start once the gate is closed; `close` then waits for the writes already under way, so that the
deletion removes what they wrote instead of racing them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager


class GateClosed(Exception):
    """The gate was closed: this write must not start."""


class WriteGate:
    def __init__(self) -> None:
        self.closed = False
        self._writing = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._stoppable: set[asyncio.Task[object]] = set()
        self._stopped: set[asyncio.Task[object]] = set()

    @contextlib.contextmanager
    def stopped_when_closed(self) -> Iterator[None]:
        """The block is cancelled at once when the gate closes (a KB's deletion stops the steps of
        an upload that come before its writes: a file being read has its worker killed), and then
        raises GateClosed."""
        if self.closed:
            raise GateClosed("the knowledge base is being deleted")
        task = asyncio.current_task()
        assert task is not None
        self._stoppable.add(task)
        try:
            yield
        except asyncio.CancelledError:
            if task in self._stopped and task.uncancel() == 0:
                raise GateClosed("the knowledge base is being deleted") from None
            raise
        finally:
            self._stoppable.discard(task)
            self._stopped.discard(task)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[None]:
        if self.closed:
            raise GateClosed("the knowledge base is being deleted")
        self._writing += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._writing -= 1
            if not self._writing:
                self._idle.set()

    async def close(self, wait_s: float = 0.0) -> bool:
        """Start no write from now on, and wait up to `wait_s` for those under way. Returns
        whether none is left."""
        self.closed = True
        for task in self._stoppable - self._stopped:
            self._stopped.add(task)
            task.cancel()
        if self._writing and wait_s > 0:
            try:
                await asyncio.wait_for(self._idle.wait(), wait_s)
            except TimeoutError:
                pass
        return not self._writing
