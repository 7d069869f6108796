"""Bookkeeping never breaks the business path (HOST_CONTRACT: one install, many uses).

The query log, its statistics and saving them are bookkeeping: the question gets its passages
whatever happens there. An error in it is caught by `BookkeepingFailures.guard`, counted (the
console shows the count and the last error) and logged -- the first time, then at most once per
LOG_EVERY_S for each kind, with how many were not logged meanwhile: a log that fails on every
question must not write a traceback per question. Text kept for bookkeeping is made storable
first (`storable`): a chat message cut in the middle of an emoji arrives with a lone UTF-16
surrogate, which no UTF-8 encoder takes.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

LOG_EVERY_S = 600.0  # one log line per kind of bookkeeping at most this often
ERROR_CHARS = 300  # of an error's message kept for the console

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (a surrogate pair is joined into its
    character first), so that it encodes as UTF-8."""
    if not _LONE_SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


@dataclass
class BookkeepingFailures:
    """The bookkeeping errors of one installation since the plugin started."""

    count: int = 0
    last: str = ""  # the latest: what failed and why
    last_at: float | None = None  # its Unix time
    _quiet_until: dict[str, float] = field(default_factory=dict)  # per kind: monotonic time of its next log line
    _not_logged: dict[str, int] = field(default_factory=dict)  # per kind: errors counted since its last line

    @contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """Run the block; an `Exception` in it is noted (`note`) and goes no further."""
        try:
            yield
        except Exception as error:  # noqa: BLE001 - bookkeeping must never fail the request
            self.note(what, error)

    def note(self, what: str, error: Exception) -> None:
        self.count += 1
        self.last = storable(f"{what}: {type(error).__name__}: {error}")[:ERROR_CHARS]
        self.last_at = time.time()
        now = time.monotonic()
        if now < self._quiet_until.get(what, 0.0):
            self._not_logged[what] = self._not_logged.get(what, 0) + 1
            return
        self._quiet_until[what] = now + LOG_EVERY_S
        unlogged = self._not_logged.pop(what, 0)
        since = f"; {unlogged} more since the last report" if unlogged else ""
        logger.warning("%s failed (%s: %s%s). The request was answered all the same; if this repeats, report it "
                       "to the plugin's maintainers with this log.", what, type(error).__name__,
                       storable(str(error))[:ERROR_CHARS], since, exc_info=(type(error), error, error.__traceback__))
