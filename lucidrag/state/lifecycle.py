"""The lifecycle of one file of a knowledge base: the states it can be in, held in one table.

A file the table does not hold is COMMITTED (its record is in plugin storage and it is, or is
about to be, in the keyword index) or unknown. Every other state is an entry here, so a file is in
exactly one state by construction; `KnowledgeBaseState` moves files between states, one method
per transition (docs/DESIGN.md, "The file lifecycle", draws them). What each state has durable in
plugin storage is in its comment.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping
from enum import Enum

from lucidrag.state.records import FileRecord


class FileState(Enum):
    INGESTING = "ingesting here"  # a journal entry, when storage took it (`journalled`)
    JOURNALLED = "journalled by a dead process"  # its journal entry: reconcile adopts or removes it
    ABORTED = "failed here, vectors may remain"  # maybe a journal entry; reconcile removes the vectors
    UNSAVED = "committed, record not saved yet"  # its journal entry, or nothing if storage is empty
    # its record, and (if storage took it: delete_document answered True) its journal entry
    # rewritten "0 chunks", which makes a restart's `reconcile` remove the record
    DELETING = "vectors deleted, record not yet"
    DELETED = "deleted, or failed"  # nothing
    # deleted or failed after a write of it whose outcome is unknown (a record save or a vector
    # upsert without an answer, which LangBot may still finish; or vectors a failed rollback
    # left): its journal entry
    # "0 chunks" (if storage took it), kept for the next process, whose `reconcile` removes
    # whatever of it is stored then
    TOMBSTONED = "gone, a late write of it may still land"


# Vectors of files in these states are no answers (and no record is rebuilt from them).
NOT_ANSWERS = (FileState.INGESTING, FileState.JOURNALLED, FileState.ABORTED, FileState.DELETING,
               FileState.DELETED, FileState.TOMBSTONED)
# Files in these states are never put in the keyword index. (A JOURNALLED file may be: its
# record says its ingest committed and only the journal entry outlived it.)
NEVER_INDEXED = (FileState.INGESTING, FileState.ABORTED, FileState.DELETING, FileState.DELETED,
                 FileState.TOMBSTONED)


class FileTable:
    """file id -> state for files that are not plainly COMMITTED, with one live view per state.
    UNSAVED entries carry the record that still has to be written."""

    def __init__(self) -> None:
        self._state: dict[str, FileState] = {}
        self._by_state: dict[FileState, dict[str, FileRecord | None]] = {s: {} for s in FileState}

    def state(self, file_id: str) -> FileState | None:
        """The file's state; None for COMMITTED or unknown."""
        return self._state.get(file_id)

    def move(self, file_id: str, to: FileState | None, record: FileRecord | None = None) -> None:
        """Put the file in state `to` (None: COMMITTED, or forgotten). `record` for UNSAVED."""
        old = self._state.pop(file_id, None)
        if old is not None:
            del self._by_state[old][file_id]
        if to is not None:
            self._state[file_id] = to
            self._by_state[to][file_id] = record if to is FileState.UNSAVED else None

    def of(self, state: FileState) -> Mapping[str, FileRecord | None]:
        """The files in `state` (a live view: copy it before moving files while iterating)."""
        return self._by_state[state]

    def unsaved_record(self, file_id: str) -> FileRecord | None:
        return self._by_state[FileState.UNSAVED].get(file_id)

    def is_answer(self, file_id: str) -> bool:
        return self._state.get(file_id) not in NOT_ANSWERS

    def may_index(self, file_id: str) -> bool:
        return self._state.get(file_id) not in NEVER_INDEXED

    def not_answers(self) -> NotAnswers:
        return NotAnswers(self)

    def __contains__(self, file_id: object) -> bool:
        return file_id in self._state

    def __iter__(self) -> Iterator[str]:
        return iter(self._state)

    def __len__(self) -> int:
        return len(self._state)


class NotAnswers(Container[str]):
    """`file_id in view`: whether the file's vectors are no answers now (O(1), nothing copied:
    retrieve asks this for every candidate)."""

    def __init__(self, table: FileTable) -> None:
        self._table = table

    def __contains__(self, file_id: object) -> bool:
        return isinstance(file_id, str) and not self._table.is_answer(file_id)
