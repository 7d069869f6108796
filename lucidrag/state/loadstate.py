"""Loading a KB's state after a restart, and its one owner.

```
CLOSED ──opened(snapshot)──► READING ──adopt──► ADOPTING ──adopted──► LOADED
   └────opened(None)──────► OPENED ───adopt──┘     │
                   READING / OPENED ◄──adoption_failed (the next hook adopts again)
```

CLOSED: nothing read yet. OPENED / READING: the meta, the storage listing and the index manifest
are read (`KnowledgeBaseState._open`); READING also has an index snapshot to read, which the KB's
queries read beside their own work (state/snapshotload.py). ADOPTING: the snapshot (or none) is
being reconciled with the stored records, once, shielded from the hook that started it. LOADED:
every mutation may run; nothing goes back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from enum import Enum

from lucidrag.state.snapshotload import SnapshotLoad
from lucidrag.state.transitions import require


class LoadPhase(Enum):
    CLOSED = "nothing read yet"
    OPENED = "meta, listing and manifest read; no snapshot to read"
    READING = "meta, listing and manifest read; the index snapshot being read"
    ADOPTING = "the snapshot being reconciled with the stored records"
    LOADED = "loaded"


class LoadState:
    def __init__(self) -> None:
        self.phase = LoadPhase.CLOSED
        self.snapshot: SnapshotLoad | None = None  # READING (and ADOPTING what it read)
        self._adoption: asyncio.Future[None] | None = None  # ADOPTING

    @property
    def opened(self) -> bool:
        return self.phase is not LoadPhase.CLOSED

    @property
    def loaded(self) -> bool:
        return self.phase is LoadPhase.LOADED

    @property
    def reading(self) -> bool:
        """The index snapshot is being read from storage (or taken in once read)."""
        return self.snapshot is not None and self.phase in (LoadPhase.READING, LoadPhase.ADOPTING)

    def opened_with(self, snapshot: SnapshotLoad | None) -> None:
        """CLOSED -> READING (a snapshot to read) or OPENED (none)."""
        require("load", self.phase, (LoadPhase.CLOSED,), "opened")
        self.snapshot = snapshot
        self.phase = LoadPhase.OPENED if snapshot is None else LoadPhase.READING

    def adopt(self, adoption: Callable[[], Awaitable[None]]) -> asyncio.Future[None]:
        """OPENED / READING -> ADOPTING: `adoption` runs once, whichever hooks wait for it."""
        if self.phase is LoadPhase.ADOPTING and self._adoption is not None:
            return self._adoption
        require("load", self.phase, (LoadPhase.OPENED, LoadPhase.READING), "adopt")
        self.phase = LoadPhase.ADOPTING
        self._adoption = asyncio.ensure_future(adoption())
        return self._adoption

    def adoption_failed(self) -> None:
        """ADOPTING -> READING / OPENED: the next hook adopts again."""
        require("load", self.phase, (LoadPhase.ADOPTING,), "adoption_failed")
        self._adoption = None
        self.phase = LoadPhase.OPENED if self.snapshot is None else LoadPhase.READING

    def adopted(self) -> None:
        """ADOPTING -> LOADED."""
        require("load", self.phase, (LoadPhase.ADOPTING,), "adopted")
        self.snapshot = None
        self._adoption = None
        self.phase = LoadPhase.LOADED
