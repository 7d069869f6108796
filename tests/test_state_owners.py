"""Each KB-level state machine has one owner with named states: a transition its current state
does not have raises instead of leaving the KB between states."""

from __future__ import annotations

import asyncio

import pytest

from lucidrag.state.lifecycle import FileState, FileTable
from lucidrag.state.loadstate import LoadPhase, LoadState
from lucidrag.state.metastate import Collection, Mark, MetaState, Presence, StoredContent
from lucidrag.state.records import FileRecord
from lucidrag.state.repairstate import RepairMode, RepairState
from lucidrag.state.store import KbMeta
from lucidrag.state.transitions import IllegalTransition


async def test_the_load_goes_through_its_phases_once_and_refuses_to_skip_one():
    load = LoadState()
    with pytest.raises(IllegalTransition):
        load.adopt(asyncio.sleep)  # nothing read yet
    with pytest.raises(IllegalTransition):
        load.adopted()
    load.opened_with(None)
    assert load.phase is LoadPhase.OPENED and not load.reading
    with pytest.raises(IllegalTransition):
        load.opened_with(None)  # opened once

    async def fails() -> None:
        raise RuntimeError("the hook ended")

    with pytest.raises(RuntimeError):
        await load.adopt(fails)
    load.adoption_failed()
    assert load.phase is LoadPhase.OPENED, "the next hook adopts again"
    runs: list[int] = []

    async def adopt() -> None:
        runs.append(1)

    first, second = load.adopt(adopt), load.adopt(adopt)
    assert first is second, "one adoption, whichever hooks wait for it"
    await first
    load.adopted()
    assert load.loaded and runs == [1]
    with pytest.raises(IllegalTransition):
        load.adoption_failed()


def test_the_collection_follows_the_mark_until_it_is_known_to_exist():
    meta = MetaState()
    meta.created()
    assert (meta.mark, meta.collection) == (Mark.NONE_YET, Collection.EXISTS), "not loaded: nothing says missing"
    meta.may_be_missing()
    assert meta.never_had_vectors
    with pytest.raises(IllegalTransition):
        meta.may_be_missing()
    assert meta.first_vectors() is True, "the mark changed: the meta is written"
    assert (meta.mark, meta.collection) == (Mark.SOME, Collection.EXISTS)
    assert meta.first_vectors() is False


def test_an_unreadable_meta_may_say_empty_until_it_is_read_or_written():
    meta = MetaState()
    meta.unreadable_at_open(None)
    assert meta.unreadable and meta.may_say_empty and meta.presence is Presence.UNKNOWN
    meta.may_be_missing()
    assert meta.collection is Collection.UNKNOWN, "unknown, not absent: it may have vectors"
    meta.read(KbMeta(None, True))
    assert meta.content is StoredContent.SAYS_NOT_EMPTY and meta.collection is Collection.EXISTS
    other = MetaState()
    other.unreadable_at_open(False)
    assert other.presence is Presence.ABSENT and not other.unreadable
    other.saved(False)
    assert other.dirty
    other.saved(True)
    assert not other.dirty and other.presence is Presence.PRESENT


def test_a_repair_trusts_no_record_until_every_file_it_found_is_indexed():
    repair = RepairState()
    with pytest.raises(IllegalTransition):
        repair.start_looking()  # storage named the files: nothing to look for
    repair.storage_knows_nothing()
    with pytest.raises(IllegalTransition):
        repair.storage_knows_nothing()
    repair.start_looking()
    assert repair.mode is RepairMode.DISCOVERING and repair.trust_records
    assert repair.discovery is not None
    repair.discovered(repair.discovery)
    assert repair.mode is RepairMode.IDLE and not repair.finding_files
    repair.rebuild()
    assert not repair.trust_records and repair.finding_files
    assert repair.discovery is not None
    repair.discovered(repair.discovery)
    assert repair.mode is RepairMode.REBUILDING, "found, not indexed yet"
    repair.indexed_everything()
    assert repair.mode is RepairMode.IDLE and repair.trust_records


def test_a_files_facts_belong_to_its_state():
    table = FileTable()
    table.move("f", FileState.INGESTING)
    table.set_unjournalled("f", 3)
    assert table.unjournalled() == {"f": 3}
    table.move("f", FileState.ABORTED)
    assert table.unjournalled() == {}, "a move starts with fresh facts"
    table.set_first_write_dim("f", 8)
    facts = table.facts("f")
    table.move("f", FileState.INGESTING)
    table.move("f", FileState.ABORTED, facts=facts)
    assert table.first_write_dim("f") == 8, "carried back"
    table.move("g", FileState.UNSAVED, FileRecord("g", "txt", []))
    assert list(table.unsaved_records()) == ["g"]
    table.committed("g")
    assert table.state("g") is FileState.COMMITTED and table.unsaved_records() == {}
    table.set_unjournalled("h", 1)
    assert "h" not in table.unjournalled(), "an untracked file has no facts"


def test_a_listing_makes_every_file_with_a_record_committed_unless_this_process_removed_it():
    table = FileTable()
    table.move("deleted", FileState.DELETED)
    table.move("ingesting", FileState.INGESTING)
    table.record_saved("ingesting")
    assert not table.record_stored("ingesting") and not table.no_stored_record(), "unknown before a listing"
    table.listed(["old", "deleted", "ingesting"])
    assert [table.state(f) for f in ("old", "deleted", "ingesting", "never")] == [
        FileState.COMMITTED, FileState.DELETED, FileState.INGESTING, None]
    assert table.with_stored_record() == {"old", "ingesting"}, "a deleted file's record went after the listing"


def test_what_storage_holds_of_a_file_outlives_its_moves_and_its_forgetting():
    table = FileTable()
    table.listed([])
    assert table.no_stored_record()
    table.committed("f")
    table.record_saved("f")
    table.journal_left("f")
    table.unanswered("f", 8)
    table.vectors_complete("f")
    table.move("f", FileState.INGESTING)
    table.forget("f")
    assert table.state("f") is None
    assert table.record_stored("f") and list(table.journals_to_delete()) == ["f"]
    assert table.may_land("f") and table.late_write_dim("f") == 8 and table.has_complete_vectors("f")
    table.record_deleted("f")
    table.journal_deleted("f")
    table.left_to_next_process("f")
    table.vectors_deleted("f")
    assert not table.record_stored("f") and not table.journals_to_delete() and not table.may_land("f")
    assert not table.has_complete_vectors("f") and table.no_stored_record()


def test_committed_files_have_no_view_of_their_own():
    table = FileTable()
    table.committed("f")
    table.move("g", FileState.TO_INDEX)
    assert table.committed_files() == ["f"] and list(table.of(FileState.TO_INDEX)) == ["g"]
    with pytest.raises(KeyError):
        table.of(FileState.COMMITTED)
