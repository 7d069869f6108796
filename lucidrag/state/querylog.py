"""The last questions a knowledge base was asked: a ring kept in memory and in plugin storage.

The console's query analytics read it. Recording a question (`QueryLog.record`) is one JSON
encoding (~0.1 ms, bench/bench_querylog.py) and no I/O, so it can sit at the end of every
retrieve. Saving is done
beside hooks (engine.py starts it with `beside(..., drain=False)`, so a query never waits for
it): beside a query at most every FLUSH_EVERY_S or when a block fills, beside any other hook
whatever is unsaved. A block is written whole, so a write that was cancelled with its hook is
simply repeated by a later one. A crash loses the questions not written yet. When plugin storage
refuses a read or a write of the log, `save` raises QueryLogStorageFailed: the engine counts it
and logs it at most every 10 minutes (base/bookkeeping.py), and a later save tries again.

Storage layout (storage_keys.query_log_block_key): numbered blocks of entries, each a JSON list
of at most BLOCK_BYTES, zlib'd into one storage value (under the 46 KiB part size, store.py).
The oldest block is deleted once the newer ones hold `capacity` entries, so storage holds
between `capacity` and `capacity` + one block of entries. After a restart the listed blocks are
read back before anything is written; questions asked meanwhile are appended after them.

Text is stored as `storable` makes it (base/bookkeeping.py: a lone surrogate becomes U+FFFD); the
engine records a question under `BookkeepingFailures.guard`, so an error here never reaches the
question's answer.

Privacy: no chat user id, session or sender is ever taken. The question's text is kept unless
the retrieval setting `query_log` says "hash" (then only a short digest, to count repeats) or
"off" (nothing is recorded).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lucidrag.base.alongside import stopping
from lucidrag.base.bookkeeping import storable
from lucidrag.base.host import HostApi
from lucidrag.state.storage_keys import query_log_block_key
from lucidrag.state.store import PART_SIZE, StorageReadFailed, delete_value, put_value, read_value, run_bounded

logger = logging.getLogger(__name__)

QUESTION_CHARS = 500  # of a question's text kept
NAME_CHARS = 120  # of a document name kept
TOP_FILES = 5  # files of a question's results kept, best first
BLOCK_BYTES = PART_SIZE - 2048  # encoded entries per block: a block is always one storage value
FLUSH_EVERY_S = 10.0  # a block being filled is written at most this often
_FORMAT = b"Q1"


class QueryLogStorageFailed(Exception):
    """Plugin storage refused to read or write a query log; what is unsaved stays in memory."""


def question_digest(kb_id: str, question: str) -> str:
    """A short digest of the question with case and spacing normalised: counts repeats without
    keeping the text (someone who guesses a question can still check it)."""
    normalised = " ".join(storable(question).lower().split())
    return hashlib.sha256(f"{kb_id}\n{normalised}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class QueryEntry:
    at: float  # Unix time the question was asked
    question: str  # "" when only its digest is kept
    digest: str
    mode: str  # hybrid | vector | keyword
    latency_ms: float  # the plugin's own work on it
    top_k: int
    results: int  # passages given to the bot (0: nothing found, see querystats.nothing_found)
    files: tuple[tuple[str, str, float], ...] = ()  # (file id, document name, best score), best first
    error: str = ""  # why it failed, if it did

    def encode(self) -> bytes:
        data: dict[str, Any] = {"t": round(self.at, 3), "q": self.question, "h": self.digest, "m": self.mode,
                                "ms": round(self.latency_ms, 2), "k": self.top_k, "n": self.results,
                                "f": [[f, n, round(s, 4)] for f, n, s in self.files]}
        if self.error:
            data["e"] = self.error
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: Any) -> QueryEntry:
        """`ValueError` if `data` is not an encoded entry."""
        try:
            files = tuple((str(f), str(n), float(s)) for f, n, s in data.get("f") or ())
            return cls(float(data["t"]), str(data.get("q") or ""), str(data["h"]), str(data.get("m") or ""),
                       float(data["ms"]), int(data["k"]), int(data["n"]), files, str(data.get("e") or ""))
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a query log entry ({error})") from None


@dataclass
class _Block:
    number: int
    entries: list[QueryEntry] = field(default_factory=list)
    encoded: list[bytes] = field(default_factory=list)
    size: int = 2  # bytes of the JSON list
    saved_count: int = 0  # entries storage holds of it
    stored: bool = False  # storage holds a value under its key

    def fits(self, encoded: bytes) -> bool:
        return not self.entries or self.size + len(encoded) + 1 <= BLOCK_BYTES

    def add(self, entry: QueryEntry, encoded: bytes) -> None:
        self.entries.append(entry)
        self.encoded.append(encoded)
        self.size += len(encoded) + 1

    @property
    def saved(self) -> bool:
        return self.saved_count == len(self.entries)


def _pack(encoded: Sequence[bytes]) -> bytes:
    return _FORMAT + zlib.compress(b"[" + b",".join(encoded) + b"]", 1)


def _unpack(stored: bytes) -> list[QueryEntry]:
    if stored[: len(_FORMAT)] != _FORMAT:
        raise ValueError("not a query log block")
    try:
        data = json.loads(zlib.decompress(stored[len(_FORMAT):]))
    except (zlib.error, ValueError) as error:
        raise ValueError(f"unreadable query log block ({error})") from None
    if not isinstance(data, list):
        raise ValueError("not a query log block")
    return [QueryEntry.decode(item) for item in data]


class QueryLog:
    """One KB's ring of recent questions. `record` never waits; `save` writes what is due."""

    def __init__(self, kb_id: str) -> None:
        self.kb_id = kb_id
        self.capacity: int | None = None  # the retrieval setting, known once a question is recorded
        self._blocks: list[_Block] = []
        self._pending: list[tuple[QueryEntry, bytes]] = []  # recorded (and encoded) before the stored blocks were read
        self._next_number = 0
        self._to_delete: set[int] = set()  # block numbers whose stored value is to go
        self._last_write: float | None = None
        self._lock = asyncio.Lock()
        self.loaded = False
        self.closed = False  # the KB is being deleted: nothing more is written

    # ---------------------------------------------------------------- in memory
    def record(self, entry: QueryEntry, capacity: int) -> None:
        """Keep `entry`. Raises (and keeps nothing) if it cannot be encoded: encoded at once, so
        that a bad entry fails its own question's bookkeeping, never a later save."""
        encoded = entry.encode()
        self.capacity = capacity
        if not self.loaded:
            self._pending = [*self._pending[-(capacity - 1):], (entry, encoded)] if capacity > 1 else [(entry, encoded)]
            return
        self._append(entry, encoded)
        self._trim(capacity)

    def _append(self, entry: QueryEntry, encoded: bytes) -> None:
        if not self._blocks or not self._blocks[-1].fits(encoded):
            self._blocks.append(_Block(self._next_number))
            self._next_number += 1
        self._blocks[-1].add(entry, encoded)

    def _trim(self, capacity: int) -> None:
        """Drop the oldest blocks while the newer ones hold `capacity` entries."""
        total = sum(len(b.entries) for b in self._blocks)
        while len(self._blocks) > 1 and total - len(self._blocks[0].entries) >= capacity:
            oldest = self._blocks.pop(0)
            total -= len(oldest.entries)
            if oldest.stored:
                self._to_delete.add(oldest.number)

    def entries(self) -> list[QueryEntry]:
        """The newest `capacity` questions (all kept while it is not known), newest first."""
        out = [entry for entry, _ in reversed(self._pending)]
        for block in reversed(self._blocks):
            out.extend(reversed(block.entries))
        return out if self.capacity is None else out[: self.capacity]

    def due(self, eager: bool = False) -> bool:
        """Whether `save` has something to write now (`eager`: whatever is unsaved, else a block
        being filled only every FLUSH_EVERY_S)."""
        if self.closed:
            return False
        if self._to_delete or (not self.loaded and self._pending):
            return True
        unsaved = [b for b in self._blocks if not b.saved]
        if not unsaved:
            return False
        recent = self._last_write is not None and time.monotonic() - self._last_write < FLUSH_EVERY_S
        return eager or not recent or unsaved[0] is not self._blocks[-1]  # a full block is written at once

    async def close(self, wait_s: float) -> bool:
        """The KB is being deleted: nothing more is written, and a write under way is waited for
        (up to `wait_s`) so that it lands before the KB's keys are listed. Whether it finished."""
        self.closed = True
        try:
            async with asyncio.timeout(max(0.0, wait_s)):
                async with self._lock:
                    return True
        except TimeoutError:
            return False

    # ---------------------------------------------------------------- storage
    async def save(self, host: HostApi, listed: Iterable[int] | None, force: bool = False,
                   eager: bool = False) -> bool:
        """Read the stored blocks first if not done yet (`listed`: the block numbers a key
        listing shows; None: unknown, so nothing is done), then write what is due (`due(eager)`;
        everything with `force`). Another save under way: nothing, unless `force`, which waits.
        Starts no call once the hook it runs beside is ending. Returns whether all is saved;
        raises QueryLogStorageFailed when plugin storage refused a read or a write."""
        if self.closed or (self._lock.locked() and not force):
            return False
        async with self._lock:
            if not self.loaded and (listed is None or not await self._load(host, listed)):
                return False
            if not force and not self.due(eager):
                return True
            refused = 0
            for number in sorted(self._to_delete):
                if stopping() or self.closed:
                    return False
                if await delete_value(host, query_log_block_key(self.kb_id, number), "an old query log block"):
                    self._to_delete.discard(number)
                else:
                    refused += 1
            for block in [b for b in self._blocks if not b.saved]:
                if stopping() or self.closed:
                    return False
                count = len(block.entries)
                if await put_value(host, query_log_block_key(self.kb_id, block.number),
                                   _pack(block.encoded[:count]), f"the query log of kb {self.kb_id}"):
                    block.saved_count, block.stored = count, True
                else:
                    refused += 1
            self._last_write = time.monotonic()
            if refused:
                raise QueryLogStorageFailed(f"plugin storage refused {refused} write(s) of kb {self.kb_id}'s query log; "
                                            "the questions are kept in memory and written by a later request")
            return not self._to_delete and all(b.saved for b in self._blocks)

    async def _load(self, host: HostApi, listed: Iterable[int]) -> bool:
        numbers = sorted(set(listed))

        async def read(number: int) -> bytes | None:
            return await read_value(host, query_log_block_key(self.kb_id, number))

        try:
            stored = await run_bounded(lambda n=n: read(n) for n in numbers)
        except StorageReadFailed as error:
            raise QueryLogStorageFailed(f"plugin storage did not read kb {self.kb_id}'s query log ({error}); "
                                        "a later request tries again") from error
        blocks: list[_Block] = []
        for number, value in zip(numbers, stored):
            if value is None:
                continue
            try:
                entries = _unpack(value)
            except ValueError as error:
                logger.warning("kb=%s: query log block %d dropped (%s)", self.kb_id, number, error)
                self._to_delete.add(number)
                continue
            block = _Block(number, stored=True)
            for entry in entries:
                block.add(entry, entry.encode())
            block.saved_count = len(entries)
            blocks.append(block)
        if self.closed:
            return False
        self._blocks = blocks + self._blocks
        self._next_number = max([self._next_number, *(n + 1 for n in numbers)])
        self.loaded = True
        pending, self._pending = self._pending, []
        for entry, encoded in pending:
            self._append(entry, encoded)
        if self.capacity is not None:
            self._trim(self.capacity)
        return True

    async def clear(self, host: HostApi, listed: Iterable[int]) -> bool:
        """Forget every question, in memory and in storage. Returns whether storage holds none
        any more (those left are deleted by later saves)."""
        async with self._lock:
            numbers = {b.number for b in self._blocks if b.stored} | self._to_delete | set(listed)
            self._next_number = max([self._next_number, *(n + 1 for n in numbers)])
            self._blocks, self._pending, self.loaded = [], [], True
            deleted = await run_bounded(
                lambda n=n: delete_value(host, query_log_block_key(self.kb_id, n), "a query log block")
                for n in sorted(numbers))
            self._to_delete = {n for n, ok in zip(sorted(numbers), deleted) if not ok}
            return not self._to_delete
