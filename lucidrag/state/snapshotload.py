"""Reading a knowledge base's keyword-index snapshot after a restart, across hooks.

At 100k chunks the snapshot is tens of MiB in thousands of plugin-storage values, which a real
LangBot hands over at a few MiB/s (docs/SCALE.md). Nothing may run after its hook returns (SDK
0.7.18), so the read is a job that any hook can carry on (`run`) and that keeps what it has read:
a query on the KB runs it beside its own work (base/alongside.py; the reads it has in flight when
it is done are finished, not wasted), and a hook that needs the index waits for it. Whichever
hooks run it, at most READS_IN_FLIGHT reads are in flight,
so the plugin's other requests are not queued behind many of them. Once every value is read, the
segments are joined, decompressed and loaded in a worker thread, once.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque

from lucidrag.base.alongside import stopping
from lucidrag.base.blocking import run_blocking
from lucidrag.base.budget import BudgetSpent, remaining
from lucidrag.base.host import HostApi
from lucidrag.index.segindex import SegmentIndex
from lucidrag.state.storage_keys import index_segment_key, part_key
from lucidrag.state.store import (
    StorageReadFailed,
    blob_head,
    read_value,
    unpack_segment,
)

logger = logging.getLogger(__name__)

READ_ATTEMPTS = 3  # a value storage fails to return this often makes the snapshot unusable
# Reads in flight, whichever hooks run them. Each is one storage row that LangBot reads, base64s
# and sends through `lbp rt`; the plugin's other requests queue behind them there.
READS_IN_FLIGHT = 4


class SnapshotUnusable(Exception):
    """A segment is missing or unreadable, or does not match the manifest."""


class SnapshotLoad:
    def __init__(self, kb_id: str, manifest: bytes) -> None:
        """`ValueError` if `manifest` is not one."""
        self.kb_id = kb_id
        self.manifest = manifest
        self.names = SegmentIndex.manifest_segment_names(manifest)
        self._segment_key = {index_segment_key(kb_id, n): n for n in self.names}
        self._todo: deque[str] = deque(self._segment_key)  # headers first, then their parts
        self._values: dict[str, bytes] = {}
        self._parts: dict[str, int] = {}  # segment key -> its part count (absent: a single value)
        self._failures: Counter[str] = Counter()
        self._in_flight = 0
        self._progress = asyncio.Event()
        self._decoding: asyncio.Future[SegmentIndex] | None = None
        self.error: str | None = None

    @property
    def read_all(self) -> bool:
        return not self._todo and not self._in_flight and self.error is None

    async def run(self, host: HostApi) -> SegmentIndex:
        """Read what is left (other hooks may be reading too), then the index. Raises
        SnapshotUnusable, or BudgetSpent when this hook's time ran out first."""
        await asyncio.gather(*(self._reader(host) for _ in range(READS_IN_FLIGHT)))
        if self.error is not None:
            raise SnapshotUnusable(self.error)
        if not self.read_all:
            raise BudgetSpent("the keyword index could not be read in this request's time")
        if self._decoding is None:
            self._decoding = asyncio.ensure_future(run_blocking(self._decode))
        try:  # shielded: a hook that ends meanwhile must not waste the work for the next one
            return await asyncio.shield(self._decoding)
        except ValueError as error:
            raise SnapshotUnusable(str(error)) from error

    def _decode(self) -> SegmentIndex:
        blobs = {}
        for key, name in self._segment_key.items():
            count = self._parts.get(key)
            stored = (self._values[key] if count is None
                      else b"".join(self._values[part_key(key, n)] for n in range(count)))
            blobs[name] = unpack_segment(stored)
        self._values.clear()  # the index keeps the joined blobs (its arrays are views of them)
        return SegmentIndex.load(self.manifest, blobs)

    async def _reader(self, host: HostApi) -> None:
        while self.error is None and not stopping():
            if not self._todo or self._in_flight >= READS_IN_FLIGHT:
                if not self._in_flight:
                    return  # all read
                if not await self._wait():
                    return  # what is in flight belongs to another hook that outlasts this one
                continue
            if remaining() <= 0:
                return
            key = self._todo.popleft()
            self._in_flight += 1
            try:
                value = await read_value(host, key)
            except StorageReadFailed as error:
                self._in_flight -= 1
                self._failed(key, str(error))
                continue
            except BaseException:  # cancelled with the hook (or the process): another hook reads it
                self._in_flight -= 1
                self._todo.appendleft(key)
                self._notify()
                raise
            self._in_flight -= 1
            self._took(key, value)
            self._notify()

    async def _wait(self) -> bool:
        """Until the next read ends; False if this hook's time ends first."""
        left = remaining()
        if left <= 0:
            return False
        try:
            await asyncio.wait_for(self._progress.wait(), None if left == float("inf") else left)
        except TimeoutError:
            return False
        return True

    def _notify(self) -> None:
        self._progress.set()
        self._progress = asyncio.Event()

    def _failed(self, key: str, reason: str) -> None:
        self._todo.append(key)
        if remaining() > 0:  # not this hook's deadline: storage failed
            self._failures[key] += 1
            if self._failures[key] >= READ_ATTEMPTS:
                self.error = f"{key} could not be read ({reason})"
        self._notify()

    def _took(self, key: str, value: bytes | None) -> None:
        if value is None:
            self.error = f"{key} is missing"
            return
        if key not in self._segment_key:
            self._values[key] = value
            return
        try:
            head = blob_head(value)
        except ValueError as error:
            self.error = f"{key}: {error}"
            return
        if isinstance(head, int):
            self._parts[key] = head
            self._todo.extend(part_key(key, n) for n in range(head))
        else:
            self._values[key] = head
