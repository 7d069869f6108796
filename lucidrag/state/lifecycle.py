"""The lifecycle of one file of a knowledge base: the states it can be in, held in one table.

Every file this process knows is in exactly one state (`FileState`), with the facts that belong
to that state (`FileFacts`); `state()` is None only for a file whose lifecycle this process does
not know (never seen, or forgotten). `KnowledgeBaseState` moves files between states, one method
per transition (docs/DESIGN.md, "The file lifecycle", draws them). What each state has durable in
plugin storage is in its comment.

Beside the state, the table holds what storage, the vector DB and the host may still do with a
file's keys, which outlives a move: whether its record is stored (once the KB's keys were listed),
whether its chunk-0 vector (written last: its vectors are complete) was written or found, whether
its journal key is still to delete, and whether a write of it may still land. A KB may hold 100k+
COMMITTED files, so a file costs one dict entry whose value is a small int (state, "record stored"
and "vectors complete" in one code); the rest is kept only for the few files it applies to.
"""

from __future__ import annotations

import time
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum

from lucidrag.state.latewrites import PREVIOUS_PROCESS_LANDING_S
from lucidrag.state.records import FileRecord


class FileState(Enum):
    # its record (in plugin storage) and its vectors: in the keyword index (an empty file is not),
    # or in the snapshot the KB's load adopts
    COMMITTED = "committed"
    INGESTING = "ingesting here"  # a journal entry, unless storage refused it (facts: `unjournalled`)
    JOURNALLED = "journalled by a dead process"  # its journal entry: reconcile adopts or removes it
    # maybe a journal entry ("0 chunks"); reconcile removes the vectors (and any record). Facts:
    # `failed` (else deleted while the collection could not be touched yet), `first_write_dim` on
    # a KB that never had a vector, `unjournalled` (0) if no entry names it
    ABORTED = "failed (or deleted) here, vectors may remain"
    UNSAVED = "committed, record not saved yet"  # its journal entry, or nothing if storage is empty
    TO_INDEX = "committed, not in the keyword index yet"  # its record (`continue_indexing` indexes it)
    # the index snapshot named it and storage has no record of it: deleted while the snapshot
    # lagged (its vectors went first), or its record was lost (its vectors are still answers);
    # it leaves once its vectors are read (none: forgotten) or its record is saved (committed)
    UNRECORDED = "in the index snapshot, no record stored"
    # its record, and (if storage took it: delete_document answered True) its journal entry
    # rewritten "0 chunks", which makes a restart's `reconcile` remove the record. Fact: `failed`
    DELETING = "vectors deleted, record not yet"
    DELETED = "deleted"  # nothing
    FAILED = "failed, nothing of it left"  # nothing
    # deleted or failed after a write of it whose outcome is unknown (a record save or a vector
    # upsert without an answer, which LangBot may still finish; or vectors a failed rollback
    # left): its journal entry
    # "0 chunks" (if storage took it), kept for the next process, whose `reconcile` removes
    # whatever of it is stored then. Facts: `failed`, `first_write_dim`
    TOMBSTONED = "gone, a late write of it may still land"


# Vectors of files in these states are no answers (and no record is rebuilt from them).
NOT_ANSWERS = (FileState.INGESTING, FileState.JOURNALLED, FileState.ABORTED, FileState.DELETING,
               FileState.DELETED, FileState.FAILED, FileState.TOMBSTONED)
# Files in these states are never put in the keyword index. (A JOURNALLED file may be: its
# record says its ingest committed and only the journal entry outlived it.)
NEVER_INDEXED = (FileState.INGESTING, FileState.ABORTED, FileState.DELETING, FileState.DELETED,
                 FileState.FAILED, FileState.TOMBSTONED)
# A file in one of these states may have vectors (a re-upload deletes them first).
MAY_HAVE_VECTORS = (FileState.COMMITTED, FileState.INGESTING, FileState.JOURNALLED, FileState.ABORTED,
                    FileState.UNSAVED, FileState.TO_INDEX, FileState.UNRECORDED, FileState.DELETING,
                    FileState.TOMBSTONED)

# A file's entry: its state's number (0: none known) plus RECORD_STORED and VECTORS_COMPLETE.
_STATES: tuple[FileState, ...] = tuple(FileState)
_CODE = {state: n for n, state in enumerate(_STATES, start=1)}
_STATE_BITS = 0x0F
_RECORD_STORED = 0x10
_VECTORS_COMPLETE = 0x20


@dataclass
class FileFacts:
    """What the table knows of a file beyond its state; a move resets them unless it carries them."""
    record: FileRecord | None = None  # UNSAVED: the record still to be written
    # INGESTING / ABORTED: no journal entry names the file (begun while storage held nothing of
    # the KB and refused the write; a restart finds it in the vector DB): its chunk count (0: ABORTED)
    unjournalled: int | None = None
    # ABORTED / TOMBSTONED on a KB that never had a vector: the dimension of vectors it may have left
    first_write_dim: int | None = None
    failed: bool = False  # ABORTED / DELETING / TOMBSTONED: a failed file, not a deleted one


class FileTable:
    """file id -> state, one live view per state (but COMMITTED, which may hold 100k+ files), the
    facts of each file (`FileFacts`), and what storage and the host may still do with its keys."""

    def __init__(self) -> None:
        self._code: dict[str, int] = {}
        self._by_state: dict[FileState, dict[str, None]] = {s: {} for s in FileState if s is not FileState.COMMITTED}
        self._facts: dict[str, FileFacts] = {}
        self._listed = False  # which files have a stored record is known (`listed`)
        self._stored = 0  # files with RECORD_STORED
        self._journals_to_delete: dict[str, None] = {}
        self._late_writes: dict[str, int | None] = {}  # file id -> the unanswered vectors' dimension
        # file id -> when an unanswered write of it or delete of its vectors (or a dead process's
        # call) can no longer land
        self._quiet_at: dict[str, float] = {}
        self._named_by_previous_process: set[str] = set()
        self._entries_kept: dict[str, None] = {}  # committed files whose entry waits for the next process

    # ------------------------------------------------------------------ states and transitions
    def state(self, file_id: str) -> FileState | None:
        """The file's state; None: this process does not know it (never seen, or forgotten)."""
        code = self._code.get(file_id, 0) & _STATE_BITS
        return _STATES[code - 1] if code else None

    def move(self, file_id: str, to: FileState, record: FileRecord | None = None, *,
             failed: bool = False, facts: FileFacts | None = None) -> None:
        """Put the file in state `to` with fresh facts (`record` for UNSAVED, `failed` for DELETING
        / TOMBSTONED), or with `facts` carried over."""
        self._leave(file_id)
        self._code[file_id] = (self._code.get(file_id, 0) & ~_STATE_BITS) | _CODE[to]
        if to is not FileState.COMMITTED:
            self._by_state[to][file_id] = None
        facts = facts if facts is not None else FileFacts(record if to is FileState.UNSAVED else None, failed=failed)
        if facts != FileFacts():
            self._facts[file_id] = facts

    def committed(self, file_id: str) -> None:
        """-> COMMITTED: its record is stored and its vectors are answers. (`move` without what
        COMMITTED never has, a view and facts: a load makes 100k+ files COMMITTED at once.)"""
        self._leave(file_id)
        self._code[file_id] = (self._code.get(file_id, 0) & ~_STATE_BITS) | _CODE[FileState.COMMITTED]

    def to_index(self, file_id: str) -> None:
        """A COMMITTED (or UNRECORDED, or unknown) file the keyword index lacks -> TO_INDEX; a file
        in any other state keeps it (its own transitions index it, or never)."""
        if self.state(file_id) in (None, FileState.COMMITTED, FileState.UNRECORDED, FileState.TO_INDEX):
            self.move(file_id, FileState.TO_INDEX)

    def forget(self, file_id: str) -> None:
        """Nothing of the file's lifecycle is left to track (its journal entry was settled by
        another process, or the vectors of an UNRECORDED file are gone): its state is unknown."""
        self._leave(file_id)
        code = self._code.get(file_id, 0) & ~_STATE_BITS
        if code:
            self._code[file_id] = code
        else:
            self._code.pop(file_id, None)

    def _leave(self, file_id: str) -> None:
        old = self.state(file_id)
        if old is not None and old is not FileState.COMMITTED:
            del self._by_state[old][file_id]
        self._facts.pop(file_id, None)

    def of(self, state: FileState) -> Mapping[str, None]:
        """The files in `state`, but COMMITTED (a live view: copy it before moving files while
        iterating)."""
        return self._by_state[state]

    def committed_files(self) -> list[str]:
        """Every COMMITTED file (a scan of the table: for repairs, not for every request)."""
        code = _CODE[FileState.COMMITTED]
        return [f for f, c in self._code.items() if c & _STATE_BITS == code]

    def is_answer(self, file_id: str) -> bool:
        return self.state(file_id) not in NOT_ANSWERS

    def may_index(self, file_id: str) -> bool:
        return self.state(file_id) not in NEVER_INDEXED

    def may_have_vectors(self, file_id: str) -> bool:
        return self.state(file_id) in MAY_HAVE_VECTORS

    def not_answers(self) -> NotAnswers:
        return NotAnswers(self)

    # ------------------------------------------------------------------ facts of a state
    def facts(self, file_id: str) -> FileFacts:
        """The file's facts (a copy: change them through the table)."""
        return replace(self._facts.get(file_id) or FileFacts())

    def unsaved_record(self, file_id: str) -> FileRecord | None:
        facts = self._facts.get(file_id)
        return facts.record if facts is not None else None

    def unsaved_records(self) -> dict[str, FileRecord | None]:
        return {f: self.unsaved_record(f) for f in self._by_state[FileState.UNSAVED]}

    def unjournalled(self) -> dict[str, int]:
        """INGESTING / ABORTED files no journal entry names (file id -> chunks)."""
        return {f: facts.unjournalled for f, facts in self._facts.items() if facts.unjournalled is not None}

    def set_unjournalled(self, file_id: str, chunks: int | None) -> None:
        """No journal entry names the file (`chunks`), or one does now (None)."""
        self._set(file_id, unjournalled=chunks)

    def first_write_dim(self, file_id: str) -> int | None:
        return self.facts(file_id).first_write_dim

    def set_first_write_dim(self, file_id: str, dim: int | None) -> None:
        self._set(file_id, first_write_dim=dim)

    def _set(self, file_id: str, **changes: object) -> None:
        if self.state(file_id) in (None, FileState.COMMITTED):
            return  # facts belong to a file on its way
        facts = replace(self._facts.get(file_id) or FileFacts(), **changes)  # type: ignore[arg-type]
        if facts == FileFacts():
            self._facts.pop(file_id, None)
        else:
            self._facts[file_id] = facts

    # ------------------------------------------------------------------ stored records
    @property
    def records_listed(self) -> bool:
        """Which files have a record in plugin storage is known (`listed`)."""
        return self._listed

    def listed(self, record_ids: Iterable[str]) -> None:
        """A listing of the KB's keys named these records: each file whose lifecycle is unknown
        is COMMITTED, and every file but a DELETED or FAILED one has its record stored."""
        self._listed = True
        # one pass over what may be 100k+ files: an unknown file has no view and no facts to leave
        removed = (_CODE[FileState.DELETED], _CODE[FileState.FAILED])  # (deleted after the listing was taken)
        codes, committed = self._code, _CODE[FileState.COMMITTED]
        for file_id in record_ids:
            code = codes.get(file_id, 0)
            if (code & _STATE_BITS) in removed or code & _RECORD_STORED:
                continue
            codes[file_id] = code | _RECORD_STORED | (0 if code & _STATE_BITS else committed)
            self._stored += 1

    def record_stored(self, file_id: str) -> bool:
        """Whether the file's record is in plugin storage, as far as the listing and every save
        and delete since say (False while the KB's keys were never listed)."""
        return self._listed and bool(self._code.get(file_id, 0) & _RECORD_STORED)

    def with_stored_record(self) -> set[str]:
        """Every file whose record is stored (a scan of the table: for the load)."""
        return {f for f, c in self._code.items() if c & _RECORD_STORED}

    def no_stored_record(self) -> bool:
        """The KB's keys were listed, and no record of it is stored since."""
        return self._listed and not self._stored

    def record_saved(self, file_id: str) -> None:
        if self._listed:  # else the listing, once taken, says so
            self._set_bit(file_id, _RECORD_STORED, True)

    def record_deleted(self, file_id: str) -> None:
        self._set_bit(file_id, _RECORD_STORED, False)

    # ------------------------------------------------------------------ complete vectors
    def vectors_complete(self, file_id: str) -> None:
        """The file's chunk-0 vector was written (a commit) or found: its vectors are complete."""
        self._set_bit(file_id, _VECTORS_COMPLETE, True)

    def vectors_deleted(self, file_id: str) -> None:
        self._set_bit(file_id, _VECTORS_COMPLETE, False)

    def has_complete_vectors(self, file_id: str) -> bool:
        """Whether this process wrote or found the file's chunk-0 vector since its last delete."""
        return bool(self._code.get(file_id, 0) & _VECTORS_COMPLETE)

    def _set_bit(self, file_id: str, bit: int, on: bool) -> None:
        code = self._code.get(file_id, 0)
        if bool(code & bit) == on:
            return
        if bit == _RECORD_STORED:
            self._stored += 1 if on else -1
        code ^= bit
        if code:
            self._code[file_id] = code
        else:
            self._code.pop(file_id)

    # ------------------------------------------------------------------ journal keys to delete
    def journal_left(self, file_id: str) -> None:
        """The file's journal entry is to go, but storage refused its delete: `flush` retries."""
        self._journals_to_delete[file_id] = None

    def journal_deleted(self, file_id: str) -> None:
        """The file's journal entry was deleted or rewritten: nothing of it is left to delete."""
        self._journals_to_delete.pop(file_id, None)

    def journals_to_delete(self) -> Mapping[str, None]:
        return self._journals_to_delete

    # ------------------------------------------------------------------ writes that may land late
    def unanswered(self, file_id: str, dim: int | None = None) -> None:
        """A write of the file's vectors (of dimension `dim`, if known) lost its answer: LangBot
        may still do it within PREVIOUS_PROCESS_LANDING_S."""
        self.save_failed(file_id, dim)
        self._lands_until(file_id, time.monotonic() + PREVIOUS_PROCESS_LANDING_S)

    def save_failed(self, file_id: str, dim: int | None = None) -> None:
        """A write of the file failed in a way that may have landed (plugin storage says no more
        than that a save failed: every failed record save counts; one whose answer was lost may
        land later too: `latewrites.storage_key_quiet_at`)."""
        if dim is not None or file_id not in self._late_writes:
            self._late_writes[file_id] = dim

    def may_land(self, file_id: str) -> bool:
        return file_id in self._late_writes

    def late_write_dim(self, file_id: str) -> int | None:
        return self._late_writes.get(file_id)

    def delete_unanswered(self, file_ids: Iterable[str], landing_s: float) -> None:
        """A delete of these files' vectors went unanswered: LangBot may still do it within
        `landing_s`, and then it removes whatever vectors of theirs are there by then."""
        for file_id in file_ids:
            self._lands_until(file_id, time.monotonic() + landing_s)

    def named_by_previous_process(self, file_id: str) -> None:
        """A dead process's journal entry names the file (or may: storage was not listed): a write
        of it or a delete of its vectors that process sent may still land (`previous_writes_until`)."""
        self._named_by_previous_process.add(file_id)

    def previous_process_named(self, file_id: str) -> bool:
        return file_id in self._named_by_previous_process

    def calls_quiet_at(self, file_id: str) -> float:
        """When no write of the file or delete of its vectors this process gave up on can land any
        more (0.0: none)."""
        return self._quiet_at.get(file_id, 0.0)

    def _lands_until(self, file_id: str, until: float) -> None:
        now = time.monotonic()
        self._quiet_at = {f: at for f, at in self._quiet_at.items() if at > now}
        self._quiet_at[file_id] = max(self._quiet_at.get(file_id, 0.0), until)

    def entry_kept(self, file_id: str) -> None:
        """The file committed while a call of it may still land: its journal entry stays for the
        next process (which adopts the file and waits for those calls)."""
        self._entries_kept[file_id] = None

    def kept_for_next_process(self) -> set[str]:
        """Committed files whose journal entry stays for the next process (`entry_kept`)."""
        self._entries_kept = {f: None for f in self._entries_kept
                              if self.state(f) in (FileState.COMMITTED, FileState.TO_INDEX, FileState.UNSAVED)}
        return set(self._entries_kept)

    def left_to_next_process(self, file_id: str) -> None:
        """The file's entry "0 chunks" is durable: the next process removes what lands."""
        self._late_writes.pop(file_id, None)


class NotAnswers(Container[str]):
    """`file_id in view`: whether the file's vectors are no answers now (O(1), nothing copied:
    retrieve asks this for every candidate)."""

    def __init__(self, table: FileTable) -> None:
        self._table = table

    def __contains__(self, file_id: object) -> bool:
        return isinstance(file_id, str) and not self._table.is_answer(file_id)
