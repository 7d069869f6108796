"""Sweeping what removals nothing durable named may have left in a KB's vector collection.

Where plugin storage cannot note that a file failed or was deleted, and the vector DB refuses or
delays the removal of its vectors, what is left (a tombstone, `remove_first_write`'s probe) may be
named by nothing once the process dies. Such a removal leaves a **sweep note**: one vector under
PROBE_FILE_ID whose text names the file (`records.sweep_note_metadata`), beside PROBE_FILE_ID's
probe. A restart finds that probe once the previous process's calls can no longer land (within a
chunk-0 listing, or `look_for_probes`), and `sweep_probes` deletes the vectors of every file a note
names that is no answer, then PROBE_FILE_ID's vectors (docs/DESIGN.md, "Where nothing durable can
say that an upload failed").
"""

from __future__ import annotations

import logging
import time
from typing import Any

from lucidrag.base.budget import holding
from lucidrag.base.host import HostApi, describe, with_retries
from lucidrag.state.kbcore import KbCore
from lucidrag.state.latewrites import PREVIOUS_PROCESS_LANDING_S, LateWriteNotes, LostAnswers, delete_file_vectors, send
from lucidrag.state.lifecycle import FileState
from lucidrag.state.metastate import Mark
from lucidrag.state.records import (
    PROBE_FILE_ID,
    noted_file,
    probe_vector_id,
    probe_vector_metadata,
    sweep_note_metadata,
)
from lucidrag.vectors.vectorscan import file_vectors, holds_other_files, stored_ids

logger = logging.getLogger(__name__)

NOTE_CHECK_ATTEMPTS = 3  # tries of the listing that tells whether a sweep note would be looked for


class ProbeSweeps(KbCore):
    """Sweep notes and the sweep of PROBE_FILE_ID's vectors (with the files the notes name)."""

    async def send_sweep_note(self, host: HostApi, collection_id: str, file_id: str, dim: int) -> None:
        """Best effort, once the collection surely exists (an upsert of this file's answered): a
        sweep note naming `file_id`, whose vectors may be left where nothing durable names the
        file (`sweep_probes`). Only where a restart looks for it (`_had_vectors`)."""
        try:
            if not await self._had_vectors(host, collection_id, file_id):
                return
            self.note_for_sweep(file_id, dim)
            await upsert_markers(host, collection_id, file_id, dim, self.files, sweep_note_markers(file_id))
        except Exception as error:  # noqa: BLE001 - the file's own removal is retried while this process lives
            logger.warning("kb=%s doc=%s: a note to remove its vectors later could not be written (%s)",
                           self.kb_id, file_id, describe(error))

    async def withdraw_note_unless_looked_for(self, host: HostApi, collection_id: str, file_id: str, dim: int,
                                              upserted: bool = True) -> None:
        """Best effort: where no later process would look for this file's sweep note
        (`_had_vectors`), PROBE_FILE_ID's vectors go again at once, unless notes of other files of
        this process are there too (the tombstone stays for this process's `reconcile`). After an
        upsert of the note that failed (not `upserted`: its answer may be lost, the note written:
        seed 4416) one vector of `dim` under PROBE_FILE_ID first makes sure the collection exists.
        Where the note may stay once the collection surely exists, the KB is marked
        (`left_for_sweep`: seeds 4416, 9647, a note whose delete failed)."""
        if self.noted != {file_id}:
            return
        try:
            if not upserted:
                async with holding(self.first_write):  # (Milvus Lite's concurrent creators)
                    await upsert_markers(host, collection_id, PROBE_FILE_ID, dim, LostAnswers(),
                                         [probe_vector_metadata(PROBE_FILE_ID)])
                upserted = True
            if not await self._had_vectors(host, collection_id, file_id):
                await with_retries(lambda: host.vector_delete(collection_id, file_ids=[PROBE_FILE_ID]))
        except Exception as error:  # noqa: BLE001 - this process's own sweep removes it later
            if upserted:
                self.left_for_sweep()
            logger.warning("kb=%s doc=%s: a note to remove its vectors later could not be withdrawn (%s)",
                           self.kb_id, file_id, describe(error))

    async def _had_vectors(self, host: HostApi, collection_id: str, file_id: str) -> bool:
        """Whether the KB is known to have had vectors, or its collection holds another file's.
        Where the stored meta, unread, may say "never had a vector", no later process looks until
        a first upload there: a note would stay meanwhile (seed 2421's full history). If the
        collection cannot say, it may have had them."""
        if self.meta.mark is Mark.SOME:
            return True
        held = True  # (unanswered: then the note that follows is a vector of the KB's itself)
        for _ in range(NOTE_CHECK_ATTEMPTS):
            try:
                held = await with_retries(lambda: holds_other_files(host, collection_id, [file_id, PROBE_FILE_ID]))
                break
            except Exception:  # noqa: BLE001 - asked again
                continue
        if held:  # the note stays
            self.left_for_sweep()
        return held

    async def keep_notes_found(self, host: HostApi, collection_id: str, dim: int) -> bool:
        """Once a query's probe (of `dim`) made sure the collection exists (`open_collection`):
        whether PROBE_FILE_ID holds sweep notes (a dead process's). If so, they stay, with the
        probe, for `sweep_probes` once the previous process's calls can no longer land, rather than
        going with the probe's delete by file id: their files' vectors would be named by nothing.
        A listing that fails keeps them too."""
        try:
            items = await with_retries(lambda: file_vectors(host, collection_id, PROBE_FILE_ID))
            if not any(map(noted_file, items)):
                return False
        except Exception as error:  # noqa: BLE001 - the sweep lists them again
            logger.warning("kb=%s: notes to remove vectors later could not be looked for (%s)",
                           self.kb_id, describe(error))
        self.note_dim = dim
        self.sweep_later(self.previous_writes_until)  # (seeds 1992, 4702: the probe stays too)
        return True

    def may_hold_dead_notes(self) -> bool:
        """Whether a dead process may have left sweep notes in the KB's collection that no
        listing of this process has shown: it exists and had vectors (a note goes only there), and
        no listing since that process's calls could no longer land showed none there (a KB created
        by this process has none)."""
        return not (self.fresh or self.never_had_vectors or self.dead_notes_final)

    async def look_for_dead_notes(self, host: HostApi, collection_id: str) -> None:
        """Unless known: one listing of PROBE_FILE_ID's vectors, the files its sweep notes name but
        for this process's own (`dead_notes`), one upload at a time. Again once the previous
        process's calls can no longer land if it came earlier; that one is final, and also this
        process's look for a dead process's probe (`probe_looked_for`). Raises if it fails."""
        async with holding(self.dead_notes_lock):
            final = time.monotonic() >= self.previous_writes_until
            if self.dead_notes_final or (self.dead_notes is not None and not final):
                return
            items = await with_retries(lambda: file_vectors(host, collection_id, PROBE_FILE_ID))
            self.dead_notes = frozenset(f for f in map(noted_file, items) if f) - self.noted
            self.dead_notes_final = final
            if final and self.probe_look_at is not None:
                self.probe_looked_for(bool(items))

    def dead_notes_may_still_land(self) -> bool:
        """A dead process left sweep notes here (removals of its failed uploads that plugin storage
        refused to note and the vector DB to do), and more of its calls may still land."""
        return bool(self.dead_notes) and not self.dead_notes_final and time.monotonic() < self.previous_writes_until

    def note_for_sweep(self, file_id: str, dim: int) -> None:
        """A sweep note naming `file_id` is about to be sent: the file's vectors and the notes go
        once none of them can land any more (`sweep_probes`)."""
        self.noted.add(file_id)
        self.notes_sent += 1
        self.note_dim = dim
        # (not marked yet: a note where no restart looks is withdrawn, `withdraw_note_unless_looked_for`)
        self.schedule_sweep(time.monotonic() + PREVIOUS_PROCESS_LANDING_S)

    def probe_look_due(self) -> bool:
        """Whether upkeep should look for a probe or sweep note a dead process left: on a KB
        without a stored record, whose chunk-0 listing (`_without_vectors`) never comes, unless
        storage holds nothing of it (then the files, noted ones included, are found by listing
        the whole collection) or it is being deleted."""
        return (self.probe_look_at is not None and time.monotonic() >= self.probe_look_at
                and self.loaded and not self.fresh and not self.writes.closed and self.files.no_stored_record()
                and not self._emptiness_may_name_files())

    async def look_for_probes(self, host: HostApi, collection_id: str) -> None:
        """One listing of PROBE_FILE_ID's probe, which every sweep note carries beside it: a dead
        process's removal nothing durable named left it (`sweep_probes` then)."""
        if not self.probe_look_due():
            return
        present = await with_retries(lambda: stored_ids(host, collection_id, [probe_vector_id(PROBE_FILE_ID)]))
        self.probe_looked_for(bool(present))

    def probe_sweep_due(self) -> bool:
        return (self.probe_sweep_at is not None and time.monotonic() >= self.probe_sweep_at
                and self.loaded and (not self.fresh or self.note_dim is not None))

    async def sweep_probes(self, host: HostApi, collection_id: str) -> None:
        """Delete the PROBE_FILE_ID vectors that removals nothing durable named may have left
        (`remove_first_write`), and first the vectors of every file a sweep note there names (or
        this process noted) that is no answer and settled here: after each such removal or note of
        this process (once none of its writes can land any more), and when a dead process left a
        probe (`_without_vectors` or `look_for_probes` look once per process). A note's file that
        is still being settled here (ingesting, ABORTED, DELETING), or unknown while
        storage's listing is not known, waits for a later upkeep. Only in a collection that exists
        (a delete of a missing one makes Milvus create it with dimension 1536), or after one
        vector of the notes' dimension has made sure it does."""
        if not self.probe_sweep_due():
            return
        due, sent = self.probe_sweep_at, self.notes_sent
        if self.fresh and self.note_dim is not None:
            async with holding(self.first_write):  # (Milvus Lite's concurrent creators)
                await upsert_markers(host, collection_id, PROBE_FILE_ID, self.note_dim, LostAnswers(),
                                     [probe_vector_metadata(PROBE_FILE_ID)])
        try:
            swept = await self._sweep(host, collection_id)
        except BaseException:
            self.left_for_sweep()  # what it found (and its probe) stays for a later sweep
            raise
        if not swept:
            self.left_for_sweep()
            return
        if self.notes_sent == sent:  # (else a note sent meanwhile may have gone: its file is swept again)
            self.noted.clear()
        if self.probe_sweep_at == due:  # (no removal under PROBE_FILE_ID was sent meanwhile)
            self.probe_sweep_at = None

    async def _sweep(self, host: HostApi, collection_id: str) -> bool:
        """`sweep_probes`' calls: whether PROBE_FILE_ID's vectors were deleted (False: a note's
        file is not settled yet), in a collection that exists."""
        items = await with_retries(lambda: file_vectors(host, collection_id, PROBE_FILE_ID))
        named = {f for f in map(noted_file, items) if f} | self.noted
        if not all(self._sweepable(f) for f in named):
            return False
        async with holding(self.lock):  # not while an upload of one of them begins
            gone = sorted(f for f in named if self.files.state(f) in _SWEPT_WITH_NOTE)
            if gone:
                await delete_file_vectors(host, self.files, collection_id, gone)
                logger.warning("kb=%s: removed the vectors of %d failed or deleted files a sweep note named",
                               self.kb_id, len(gone))
        await with_retries(lambda: host.vector_delete(collection_id, file_ids=[PROBE_FILE_ID]))
        return True

    def _sweepable(self, file_id: str) -> bool:
        """Whether a sweep note's file is settled here: no answer, or durably named."""
        state = self.files.state(file_id)
        if state is None:  # nothing names it, if storage's listing is known and every file found
            return self.files.records_listed and not self.repair.finding_files
        return state not in _SETTLING


# A sweep note's file in these states is still being settled by this process (an UNSAVED one is
# an answer: its vectors stay)
_SETTLING = (FileState.INGESTING, FileState.ABORTED, FileState.DELETING)
# and its vectors go with the note in these (None: unknown here)
_SWEPT_WITH_NOTE = (None, FileState.FAILED, FileState.DELETED)


def sweep_note_markers(file_id: str) -> list[dict[str, Any]]:
    """A sweep note naming `file_id`, and PROBE_FILE_ID's probe beside it: the one vector a
    restart looks for (`look_for_probes`)."""
    return [sweep_note_metadata(file_id), probe_vector_metadata(PROBE_FILE_ID)]


async def upsert_markers(host: HostApi, collection_id: str, file_id: str, dim: int, notes: LateWriteNotes,
                          markers: list[dict[str, Any]]) -> None:
    """One upsert of these marker vectors (probes, tombstones, sweep notes: each its metadata with
    its id and text), all the vector [1, 0, ...] of `dim`, noted in `notes` under `file_id` if its
    answer is lost."""
    vector = [0.0] * dim
    vector[0] = 1.0
    await with_retries(lambda: send(notes, file_id, dim, lambda: host.vector_upsert(
        collection_id=collection_id, vectors=[vector] * len(markers), ids=[m["uuid"] for m in markers],
        metadata=markers, documents=[m["text"] for m in markers])))
