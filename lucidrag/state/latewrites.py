"""Writes of a file that may land after the plugin stopped waiting for them.

LangBot runs each host call in a task of its own and never cancels one the plugin gave up on (the
SDK's call timeout ran out, or a deadline of the plugin's cut the wait short): such an upsert may
write its vectors, and such a record save its record, long after the plugin removed the file.
`send` notes, per file, that one of its writes went unanswered (and the vectors' dimension, if
known): a KB's file table keeps that (`FileTable.unanswered`), so that removing the file leaves
its journal entry "0 chunks" for the next process (TOMBSTONED), whose `reconcile` removes
whatever landed meanwhile, and an upload of the same id waits until it can no longer land.
`send_delete` notes a delete of a file's vectors whose answer was lost: an upload of the same id
waits before it removes the earlier version until that delete can no longer land
(`FileTable.calls_quiet_at`).
`UnansweredStorageWrites` does the same for plugin-storage keys, so that a KB's deletion lists its
keys once more after such a write has had time to land, and an upload of a file waits until a
write or delete of its record given up on can no longer land.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import Protocol, TypeVar

from lucidrag.base.budget import BudgetSpent
from lucidrag.base.host import HostApi, is_connection_lost, with_retries
from lucidrag.state.storage_keys import keys_of_kb

T = TypeVar("T")

# How long after the plugin gave up on a plugin-storage write LangBot may still do it: the SDK
# gives up after 15 s, while LangBot's task carries on behind a slow database.
STORAGE_LANDING_S = 60.0
# How long after a restart a host call of the previous process may still land: the runtime does not
# cancel a dead plugin's calls (its PluginConnectionHandler does not cancel action tasks when the
# connection closes) and LangBot's task carries on behind a slow vector DB; twice the SDK's longest
# call timeout (60 s, an upsert).
PREVIOUS_PROCESS_LANDING_S = 120.0


def answer_lost(error: BaseException) -> bool:
    """Whether a call that raised `error` may still have been done by LangBot: the SDK's call
    timed out, the plugin stopped waiting (a deadline, a cancellation) or the connection dropped,
    rather than LangBot refusing it."""
    if isinstance(error, (asyncio.CancelledError, BudgetSpent, TimeoutError)) or is_connection_lost(error):
        return True
    return any(cls.__name__ == "ActionCallTimeoutError" for cls in type(error).__mro__)


class LateWriteNotes(Protocol):
    def unanswered(self, file_id: str, dim: int | None = None) -> None:
        """A write of the file may still land (`dim`: its vectors' dimension, if known)."""


class LostAnswers:
    """Notes for calls of no KB's file: whether any of them lost its answer."""

    def __init__(self) -> None:
        self.lost = False

    def unanswered(self, file_id: str, dim: int | None = None) -> None:
        self.lost = True


async def send(notes: LateWriteNotes, file_id: str, dim: int | None, call: Callable[[], Awaitable[T]]) -> T:
    """One attempt of a write of `file_id`'s vectors (of dimension `dim`), noted in `notes` if its
    answer is lost."""
    return await _noting_a_lost_answer(call, lambda: notes.unanswered(file_id, dim))


async def _noting_a_lost_answer(call: Callable[[], Awaitable[T]], note: Callable[[], None]) -> T:
    """`call`, and `note()` if it raised with its answer lost (`answer_lost`)."""
    try:
        return await call()
    except BaseException as error:
        if answer_lost(error):
            note()
        raise


class LateDeleteNotes(Protocol):
    def delete_unanswered(self, file_ids: Iterable[str], landing_s: float) -> None:
        """A delete of these files' vectors may still land within `landing_s`."""


async def send_delete(notes: LateDeleteNotes, file_ids: list[str], call: Callable[[], Awaitable[T]]) -> T:
    """One attempt of a delete of `file_ids`' vectors, noted in `notes` if its answer is lost: done
    later, it would remove the vectors of an upload of the same id written meanwhile (seed 1783)."""
    return await _noting_a_lost_answer(call, lambda: notes.delete_unanswered(file_ids, PREVIOUS_PROCESS_LANDING_S))


async def delete_file_vectors(host: HostApi, notes: LateDeleteNotes, collection_id: str, file_ids: list[str]) -> None:
    """Delete `file_ids`' vectors by file id (retried), each attempt noted in `notes` if its answer
    is lost (`send_delete`)."""
    await with_retries(lambda: send_delete(notes, file_ids, lambda: host.vector_delete(collection_id,
                                                                                      file_ids=file_ids)))


class UnansweredStorageWrites:
    """The plugin-storage keys of one installation whose write (or delete) went unanswered in this
    process (the time it was given up on): LangBot may still write (or delete) them."""

    def __init__(self) -> None:
        self._given_up: dict[str, float] = {}
        self._deletes_given_up: dict[str, float] = {}

    def given_up(self, key: str) -> None:
        self._given_up = _noted(self._given_up, key)

    def delete_given_up(self, key: str) -> None:
        self._deletes_given_up = _noted(self._deletes_given_up, key)

    def quiet_at(self, kb_id: str) -> float:
        """When every write of the KB's keys given up on so far has had time to land."""
        late = keys_of_kb(list(self._given_up), kb_id)
        return max((self._given_up[k] + STORAGE_LANDING_S for k in late), default=0.0)

    def key_quiet_at(self, key: str) -> float:
        """When no write or delete of `key` given up on so far can land any more (0.0: none)."""
        return max((at + STORAGE_LANDING_S for at in (self._given_up.get(key), self._deletes_given_up.get(key))
                    if at is not None), default=0.0)


def _noted(given_up: dict[str, float], key: str) -> dict[str, float]:
    """`given_up` without what can no longer land, and `key` given up on now."""
    now = time.monotonic()
    return {**{k: at for k, at in given_up.items() if at + STORAGE_LANDING_S > now}, key: now}


# the installation's, set for the duration of each hook
unanswered_storage_writes: ContextVar[UnansweredStorageWrites | None] = ContextVar(
    "unanswered_storage_writes", default=None)


@contextlib.contextmanager
def noting_unanswered_writes(writes: UnansweredStorageWrites) -> Iterator[None]:
    """Plugin-storage writes given up on within the block are noted in `writes`."""
    token = unanswered_storage_writes.set(writes)
    try:
        yield
    finally:
        unanswered_storage_writes.reset(token)


def storage_key_quiet_at(key: str) -> float:
    """When no write or delete of `key` this process gave up on can land any more (0.0: none)."""
    writes = unanswered_storage_writes.get()
    return writes.key_quiet_at(key) if writes is not None else 0.0


def storage_writes_may_land(kb_id: str) -> bool:
    """Whether a write of the KB's keys this process gave up on may still land."""
    writes = unanswered_storage_writes.get()
    return writes is not None and time.monotonic() < writes.quiet_at(kb_id)
