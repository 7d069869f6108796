"""Writes that must not land after a point in time: a knowledge base's, once its deletion starts.

LangBot deletes a KB while an upload into it may still be running. Each of the upload's writes
(a batch of vectors, a journal entry, the commit) runs inside `WriteGate.write`, which refuses to
start once the gate is closed; `close` then waits for the writes already under way, so that the
deletion removes what they wrote instead of racing them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class GateClosed(Exception):
    """The gate was closed: this write must not start."""


class WriteGate:
    def __init__(self) -> None:
        self.closed = False
        self._writing = 0
        self._idle = asyncio.Event()
        self._idle.set()

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
        if self._writing and wait_s > 0:
            try:
                await asyncio.wait_for(self._idle.wait(), wait_s)
            except TimeoutError:
                pass
        return not self._writing
