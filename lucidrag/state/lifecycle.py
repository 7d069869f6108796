"""The lifecycle of one file of a knowledge base: the states it can be in, held in one table.

A file the table does not hold is COMMITTED (its record is in plugin storage and it is in the
keyword index, or will be once the KB's load adopts the snapshot) or never seen; the table leaves it by one of two named
transitions, `committed` or `forget`. Every other state is an entry here, so a file is in exactly
one state by construction, with the facts that belong to it (`FileFacts`); `KnowledgeBaseState`
moves files between states, one method per transition (docs/DESIGN.md, "The file lifecycle",
draws them). What each state has durable in plugin storage is in its comment.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass, replace
from enum import Enum

from lucidrag.state.records import FileRecord


class FileState(Enum):
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
    """file id -> state for files that are not plainly COMMITTED, with one live view per state and
    the facts of each file (`FileFacts`)."""

    def __init__(self) -> None:
        self._state: dict[str, FileState] = {}
        self._by_state: dict[FileState, dict[str, None]] = {s: {} for s in FileState}
        self._facts: dict[str, FileFacts] = {}

    def state(self, file_id: str) -> FileState | None:
        """The file's state; None: no entry (COMMITTED, or never seen or forgotten by this process:
        the index and the stored records say which)."""
        return self._state.get(file_id)

    def move(self, file_id: str, to: FileState, record: FileRecord | None = None, *,
             failed: bool = False, facts: FileFacts | None = None) -> None:
        """Put the file in state `to` with fresh facts (`record` for UNSAVED, `failed` for DELETING
        / TOMBSTONED), or with `facts` carried over."""
        self._drop(file_id)
        self._state[file_id] = to
        self._by_state[to][file_id] = None
        facts = facts if facts is not None else FileFacts(record if to is FileState.UNSAVED else None, failed=failed)
        if facts != FileFacts():
            self._facts[file_id] = facts

    def to_index(self, file_id: str) -> None:
        """A COMMITTED (or UNRECORDED) file the keyword index lacks -> TO_INDEX; a file in any other
        state keeps it (its own transitions index it, or never)."""
        if self._state.get(file_id) in (None, FileState.UNRECORDED, FileState.TO_INDEX):
            self.move(file_id, FileState.TO_INDEX)

    def committed(self, file_id: str) -> None:
        """The file is COMMITTED: its record is stored (it leaves the table)."""
        self._drop(file_id)

    def forget(self, file_id: str) -> None:
        """Nothing of the file is left to track (its journal entry was settled by another process,
        or the vectors of an UNRECORDED file are gone)."""
        self._drop(file_id)

    def _drop(self, file_id: str) -> None:
        old = self._state.pop(file_id, None)
        if old is not None:
            del self._by_state[old][file_id]
        self._facts.pop(file_id, None)

    def of(self, state: FileState) -> Mapping[str, None]:
        """The files in `state` (a live view: copy it before moving files while iterating)."""
        return self._by_state[state]

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
        if file_id not in self._state:
            return  # facts belong to a tracked file
        facts = replace(self._facts.get(file_id) or FileFacts(), **changes)  # type: ignore[arg-type]
        if facts == FileFacts():
            self._facts.pop(file_id, None)
        else:
            self._facts[file_id] = facts

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
