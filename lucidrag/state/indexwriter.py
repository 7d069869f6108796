"""The keyword index's snapshot in plugin storage, and its one writer.

The snapshot is immutable segments plus one manifest naming them (the way Lucene's IndexWriter owns
its segments and one segments_N file). `IndexSnapshotWriter` is the only owner of what this process
knows about it and of what it still has to write:

```
manifest:  UNKNOWN ──(read at the load, or written here)──► KNOWN (its segments: `live`)
changes:   CLEAN ──(the index changed, or a write failed)──► DIRTY ──(`write` done)──► CLEAN
```

A write goes in one order: new segments, then the manifest naming them, then deletes of the
segments it no longer names (`pending_drops`). Orphans are segments a storage listing showed that
no manifest names (a crash between writes); they are deleted only while the manifest is KNOWN, and
never one that the stored manifest or the one about to be written names (`named`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from lucidrag.base.blocking import run_blocking
from lucidrag.index.segindex import IndexChanges, SegmentIndex
from lucidrag.state.store import KbStore, pack_segments


@dataclass
class IndexSnapshotWriter:
    dirty: bool = False  # DIRTY: changes of the index not written yet
    manifest_known: bool = False  # KNOWN: the stored manifest was read or written by this process
    live: set[str] = field(default_factory=set)  # the segments the stored manifest names (once KNOWN)
    pending_segments: dict[str, bytes] = field(default_factory=dict)  # (packed) written before the manifest
    pending_manifest: bytes | None = None
    pending_drops: set[str] = field(default_factory=set)  # deleted after the manifest
    orphans: set[str] = field(default_factory=set)  # listed, named by no manifest
    guard: asyncio.Lock = field(default_factory=asyncio.Lock)  # one write at a time

    def named(self) -> set[str]:
        """Segments the stored manifest, or the one about to be written, names, and those written
        before it: never orphans."""
        named = self.live | set(self.pending_segments)
        if self.pending_manifest is not None:
            named |= set(SegmentIndex.manifest_segment_names(self.pending_manifest))
        return named

    def being_written(self, name: str) -> bool:
        return name in self.pending_segments

    def manifest_read(self, names: list[str]) -> None:
        """UNKNOWN -> KNOWN: the load read the stored manifest."""
        self.live = set(names)
        self.orphans -= self.live
        self.manifest_known = True

    def listed(self, segments: list[str]) -> None:
        """A storage listing showed these segments."""
        self.orphans |= set(segments) - self.named()

    def drop_all(self, manifest: bytes) -> None:
        """The index starts afresh: every segment of `manifest` goes once a new manifest is written."""
        self.pending_segments.clear()
        self.pending_drops |= set(SegmentIndex.manifest_segment_names(manifest))

    def needs_upkeep(self) -> bool:
        return self.dirty or bool(self.pending_drops) or (self.manifest_known and bool(self.orphans - self.named()))

    async def write(self, store: KbStore, changes: IndexChanges) -> bool:
        """Write `changes` and whatever an earlier write left (the caller holds `guard`). DIRTY ->
        CLEAN, or DIRTY with the rest left for the next write on a failure."""
        self.pending_segments.update(await run_blocking(pack_segments, changes.new_segments))
        if changes.manifest_changed:  # (most ingests only add a segment held in memory)
            self.pending_manifest = changes.manifest
        for name in changes.dropped_segments:
            if self.pending_segments.pop(name, None) is None:
                self.pending_drops.add(name)
        for name in sorted(self.pending_segments):
            if not await store.save_index_segment(name, self.pending_segments[name]):
                self.dirty = True
                return False
            self.pending_segments.pop(name, None)  # (a rebuild may have dropped it meanwhile)
        if self.pending_manifest is not None:
            if not await store.save_index_manifest(self.pending_manifest):
                self.dirty = True
                return False
            self.live = set(SegmentIndex.manifest_segment_names(self.pending_manifest))
            self.orphans -= self.live
            self.pending_manifest = None
            self.manifest_known = True
        self.dirty = False
        for name in sorted(self.pending_drops):
            if await store.delete_index_segment(name):
                self.pending_drops.discard(name)
        return True

    async def delete_orphans(self, store: KbStore, deadline: float) -> None:
        """Only once the live manifest is KNOWN: a manifest that could not be read must not turn its
        segments into orphans."""
        for name in sorted(self.orphans - self.named()):
            if time.monotonic() >= deadline or not self.manifest_known:
                return
            if await store.delete_index_segment(name):
                self.orphans.discard(name)
