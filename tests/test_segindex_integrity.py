"""lucidrag.index.segindex, the parts the reference-equality tests (test_segindex.py) do not reach:
a snapshot that is damaged in a way its CRC cannot catch (forged with a matching manifest) is
refused with ValueError (kbstate then re-indexes from the records) instead of being served or
crashing; snapshots of plain-string chunk ids and of loaded indexes round-trip; index statistics
stay exact when files are removed from the middle of merged segments and across posting blocks.
Written against mutation survivors (docs/TESTING.md)."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Callable

import numpy as np
import pytest

from lucidrag.index import segindex
from lucidrag.index.segindex import SegmentIndex
from lucidrag.index.terms import TERMS_VERSION, tokenize_chunks
from tests.reference_bm25 import BM25Index
from tests.test_segindex import EN as EN_WORDS
from tests.test_segindex import (
    QUERIES,
    Corpus,
    assert_same_results,
    hit_tuples,
    restarted,
    store_apply,
)

# -- forging snapshots ------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def persisted_small_segments(persist_every_segment: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each snapshot here is a few small files: their segments are persisted (and merged) as
    production persists and merges big ones."""
    monkeypatch.setattr(segindex, "PERSISTED_MERGE_FACTOR", segindex.MERGE_FACTOR)


def set_merge_factor(monkeypatch: pytest.MonkeyPatch, factor: int) -> None:
    monkeypatch.setattr(segindex, "MERGE_FACTOR", factor)
    monkeypatch.setattr(segindex, "PERSISTED_MERGE_FACTOR", factor)


def _one_segment(chunks: list[tuple[str, dict[str, int]]] | None = None, uuids: bool = True) -> tuple[str, bytes, bytes]:
    """(segment name, segment blob, manifest) of an index holding one file: `chunks`, or four
    generated chunks."""
    c = Corpus(31)
    if chunks is None:
        c.add("doc-0", n_chunks=4, uuids=uuids)
    else:
        c.idx.add_file("doc-0", chunks)
    changes = c.idx.take_changes()
    (name, blob), = changes.new_segments.items()
    return name, blob, changes.manifest


def _with_manifest(manifest: bytes, name: str, blob: bytes) -> bytes:
    """The manifest, vouching for `blob` (its size and CRC-32): only the segment's own checks
    can refuse it."""
    return _edit_manifest(manifest, lambda body: body["segments"][0].update(bytes=len(blob), crc=zlib.crc32(blob)))


def _edit_manifest(manifest: bytes, change: Callable[[dict], None]) -> bytes:
    body = json.loads(zlib.decompress(manifest[5:]))
    change(body)
    return manifest[:5] + zlib.compress(json.dumps(body).encode())


def _with_header(blob: bytes, change: Callable[[dict], None]) -> bytes:
    (hlen,) = struct.unpack_from("<I", blob, 8)
    header, sections = json.loads(blob[12 : 12 + hlen]), blob[segindex._align8(12 + hlen) :]
    change(header)
    hb = json.dumps(header).encode()
    head = blob[:8] + struct.pack("<I", len(hb)) + hb
    return head + bytes(segindex._align8(len(head)) - len(head)) + sections


def _with_tables(name: str, blob: bytes, change: Callable[[segindex._Segment], None]) -> bytes:
    """The blob re-serialised after `change` edited copies of its tables (the header follows)."""
    seg = segindex._Segment.from_bytes(name, blob)
    for attr in ("file_starts", "file_postings", "lens", "hashes", "offsets", "postings", "uuids", "id_offsets"):
        value = getattr(seg, attr)
        if value is not None:
            setattr(seg, attr, value.copy())
    change(seg)
    return seg.to_bytes()


def _refused(name: str, manifest: bytes, blob: bytes) -> None:
    with pytest.raises(ValueError):
        SegmentIndex.load(_with_manifest(manifest, name, blob), {name: blob})


def _set(table: str, index: int, value: int) -> Callable[[segindex._Segment], None]:
    def change(seg: segindex._Segment) -> None:
        getattr(seg, table)[index] = value
    return change


def _two_files_out_of_order(seg: segindex._Segment) -> None:
    seg.file_ids = ["doc-0", "doc-1"]
    seg.file_starts = np.array([0, seg.n_slots + 1, seg.n_slots], dtype=np.uint32)
    seg.file_postings = np.array([len(seg.postings), 0], dtype=np.uint32)


def _swap_last_two_terms(seg: segindex._Segment) -> None:
    seg.hashes[-2:] = seg.hashes[-2:][::-1].copy()


def _repeat_last_term(seg: segindex._Segment) -> None:
    seg.hashes[-1] = seg.hashes[-2]


def test_a_manifest_vouching_for_an_intact_segment_loads():
    name, blob, manifest = _one_segment()
    assert len(SegmentIndex.load(_with_manifest(manifest, name, blob), {name: blob})) == 4


@pytest.mark.parametrize("change", [
    lambda h: h.update(slots=-1), lambda h: h.update(terms=-1), lambda h: h.update(postings=-1),
    lambda h: h.update(id_bytes=-1), lambda h: h.update(ids="zip"), lambda h: h.update(files="doc-0"),
    lambda h: h.update(files=[7]), lambda h: h.pop("terms"),
], ids=["slots", "terms", "postings", "id_bytes", "id-mode", "files-not-a-list", "file-not-a-string", "no-terms"])
def test_a_segment_whose_header_lies_is_refused(change):
    name, blob, manifest = _one_segment()
    _refused(name, manifest, _with_header(blob, change))


def test_a_blob_that_is_not_a_segment_of_this_version_is_refused():
    name, blob, manifest = _one_segment()
    _refused(name, manifest, b"LRBM" + blob[4:])  # the right length, another magic
    _refused(name, manifest, blob[:4] + bytes([segindex._FORMAT_VERSION + 1]) + blob[5:])
    _refused(name, manifest, blob[:30])


@pytest.mark.parametrize("change", [
    _set("file_starts", 0, 1), _set("file_starts", -1, 3), _two_files_out_of_order,
    _set("offsets", 0, 1), _set("offsets", -1, 1), _set("offsets", 2, 0), _set("offsets", 2, 2),
    _swap_last_two_terms, _repeat_last_term,
    _set("postings", 0, 4 << segindex._TF_BITS | 1),  # chunk 4 of chunks 0-3
    _set("file_postings", 0, 1),
], ids=["first-file-start", "last-file-start", "file-starts-decrease", "first-offset", "last-offset",
        "offsets-decrease", "empty-term-run", "terms-unsorted", "term-twice", "posting-past-the-chunks",
        "file-postings"])
def test_a_segment_whose_tables_disagree_is_refused(change):
    name, blob, manifest = _one_segment()
    _refused(name, manifest, _with_tables(name, blob, change))


def test_a_segment_of_two_terms_out_of_order_is_refused():
    name, blob, manifest = _one_segment([("c0", {"pump": 1, "valve": 2})])
    _refused(name, manifest, _with_tables(name, blob, _swap_last_two_terms))


@pytest.mark.parametrize("change", [_set("id_offsets", 0, 1), _set("id_offsets", -1, 47), _set("id_offsets", 2, 5)],
                         ids=["first", "last", "decrease"])
def test_a_segment_whose_chunk_ids_do_not_add_up_is_refused(change):
    name, blob, manifest = _one_segment(uuids=False)
    assert segindex._Segment.from_bytes(name, blob).id_offsets[-1] == 48
    _refused(name, manifest, _with_tables(name, blob, change))


@pytest.mark.parametrize("change", [
    lambda s: s.update(dead=[1]),  # the segment has one file: 0
    lambda s: s.update(dead=["0"]), lambda s: s.update(dead=0), lambda s: s.update(crc=str(s["crc"])),
    lambda s: s.update(bytes=float(s["bytes"])), lambda s: s.update(name=7),
], ids=["tombstone-past-the-files", "tombstone-not-int", "tombstones-not-a-list", "crc", "bytes", "name"])
def test_a_manifest_whose_segment_entry_is_malformed_is_refused(change):
    name, blob, manifest = _one_segment()
    with pytest.raises(ValueError):
        SegmentIndex.load(_edit_manifest(manifest, lambda body: change(body["segments"][0])), {name: blob})


def test_a_manifest_of_another_kind_is_refused():
    name, blob, manifest = _one_segment()
    with pytest.raises(ValueError):
        SegmentIndex.load(b"LRBM" + manifest[4:], {name: blob})


@pytest.mark.parametrize("change", [lambda b: b.update(token=5), lambda b: b.update(next="3")], ids=["token", "next"])
def test_a_manifest_with_a_malformed_name_counter_is_refused(change):
    name, blob, manifest = _one_segment()
    with pytest.raises(ValueError):
        SegmentIndex.load(_edit_manifest(manifest, change), {name: blob})


# -- round trips --------------------------------------------------------------------------------


@pytest.mark.parametrize("uuids", [True, False], ids=["uuid-ids", "string-ids"])
def test_a_loaded_index_answers_and_saves_again_like_the_original(uuids):
    c = Corpus(17)
    for f in range(12):
        c.add(f"doc-{f}", uuids=uuids)
    c.remove("doc-3")
    store: dict[str, bytes] = {}
    store_apply(store, c.idx.take_changes())
    back = restarted(store)
    assert_same_results(c.ref, back, c.text_of(), queries=QUERIES[:6])
    # a loaded index re-delivers its segments (after a failed write), and they load again
    again = back.take_changes(everything=True)
    second = SegmentIndex.load(again.manifest, again.new_segments)
    for q in QUERIES[:6]:
        assert hit_tuples(second, q) == hit_tuples(c.idx, q)


def test_segments_read_as_bytearray_or_memoryview_load():
    c = Corpus(19)
    for f in range(3):
        c.add(f"doc-{f}")
    changes = c.idx.take_changes()
    for wrap in (bytearray, memoryview):
        back = SegmentIndex.load(changes.manifest, {n: wrap(b) for n, b in changes.new_segments.items()})
        assert hit_tuples(back, "pump valve") == hit_tuples(c.idx, "pump valve")


def test_each_save_hands_out_only_the_segments_built_since_the_last():
    c = Corpus(23)
    saved: set[str] = set()
    for f in range(5):  # below MERGE_FACTOR: no merge, one new segment per file
        c.add(f"doc-{f}")
        changes = c.idx.take_changes()
        assert len(changes.new_segments) == 1 and not saved & set(changes.new_segments)
        saved |= set(changes.new_segments)
    assert c.idx.take_changes().new_segments == {}


# -- statistics ----------------------------------------------------------------------------------


def test_removing_a_file_from_the_middle_of_a_merged_segment_counts_only_its_chunks():
    c = Corpus(29)
    for f in range(segindex.MERGE_FACTOR):  # the last add merges them into one segment
        c.add(f"doc-{f}", n_chunks=3)
    assert c.idx.stats()["segments"] == 1
    c.remove("doc-5")
    stats = c.idx.stats()
    assert stats["dead_slots"] == 3 and stats["chunks"] == 3 * (segindex.MERGE_FACTOR - 1)
    assert stats["avgdl"] == pytest.approx(c.ref.stats()["avgdl"])
    store: dict[str, bytes] = {}
    store_apply(store, c.idx.take_changes())
    back = restarted(store).stats()
    assert {k: back[k] for k in ("chunks", "dead_slots", "avgdl")} == {k: stats[k] for k in ("chunks", "dead_slots", "avgdl")}


@pytest.mark.parametrize("with_chunks", [True, False])
@pytest.mark.parametrize("chunks", [[("s0", {}), ("s1", {})], [("w0", {"pump": 1})]], ids=["no-terms", "one-term"])
def test_a_file_of_no_or_one_term_leaves_the_statistics_when_removed(chunks, with_chunks):
    c = Corpus(37)
    for f in range(segindex.MERGE_FACTOR - 1):  # the small file merges with these into one segment
        c.add(f"doc-{f}")
    counted = ("chunks", "files", "avgdl")

    def statistics() -> tuple[dict, dict]:
        stats = c.idx.stats()
        return {k: stats[k] for k in counted}, {t: c.idx.document_frequency(t) for t in ("pump", "valve", "seal")}

    before = statistics()
    c.idx.add_file("small", chunks)
    assert c.idx.document_frequency("pump") == before[1]["pump"] + len(chunks[0][1])
    assert c.idx.remove_file("small", chunks if with_chunks else None)
    assert statistics() == before


def test_postings_processed_in_blocks_give_the_same_index(monkeypatch):
    """Merges, removals without the file's chunks and restarts with tombstones work on a
    segment's postings in blocks of _BLOCK (4M): small blocks here, so each crosses many."""
    monkeypatch.setattr(segindex, "_BLOCK", 7)
    set_merge_factor(monkeypatch, 3)
    monkeypatch.setattr(segindex, "BASE_POSTINGS", 16)
    c = Corpus(41)
    for f in range(20):
        c.add(f"doc-{f}")
    for f in range(0, 20, 3):
        c.remove(f"doc-{f}", with_chunks=False)
    store: dict[str, bytes] = {}
    store_apply(store, c.idx.take_changes())
    back = restarted(store)
    assert back.stats()["dead_slots"] == c.idx.stats()["dead_slots"] > 0
    fresh = BM25Index()
    for fid, toks in c.tokens.items():
        fresh.add_tokenized(fid, toks)
    for idx in (c.idx, back):
        assert_same_results(fresh, idx, c.text_of())
        assert idx.stats()["avgdl"] == pytest.approx(fresh.stats()["avgdl"])



# A snapshot written by format version 1 (two files, one with plain-string chunk ids, one with a
# UUID): what plugin storage holds from earlier releases must keep loading after an upgrade, as
# long as its terms are the tokeniser's (its manifest names none: the first tokeniser's).
_V1_SNAPSHOT = {
    "manifest": (
        "TFJTTQF4nHXMOw6DMBCE4btMbVnrFyZ7lYgC8IqCYKTgIghx91iRotBk6n++A7MBG20VBjDpGBTKOksGY1ofSTIRFLK8CrhG"
        "m0yL5LKB7wdyv8il0/RZzYe9SE28axTG5whuvCfbulD1JH2q7+5UfwDzA2z4Ai5604YY4+0idOcbE8c1ZQ=="
    ),
    "golden00.000000": (
        "TFJTRwEAAABQAAAAeyJzbG90cyI6MiwidGVybXMiOjE4LCJwb3N0aW5ncyI6MTgsImlkcyI6InN0ciIsImlkX2J5dGVzIjo0"
        "LCJmaWxlcyI6WyJtYW51YWwiXX0AAAAAAAAAAAIAAAASAAAAAAAAAAQAAAAFAAAAYBbDtAf/AgivZei0BwsvCNIn2rWXaVox"
        "vmfe7QA7dEMcx2XhQJw4Sle5SEQZt9dWDUSVfnf+PWYrMRYnDg8nbJZ3lbdipVaBzgvqKQjjSpJQVuU0CKppn0DSOoZMWIWv"
        "H/ZGhkx9jK9wnk2GTGiQr9/N+YZMvfWvmo2t/s3bKbBR1LEBylfJtq2TM1oJyDX4AAAAAAEAAAACAAAAAwAAAAQAAAAFAAAA"
        "BgAAAAcAAAAIAAAACQAAAAoAAAALAAAADAAAAA0AAAAOAAAADwAAABAAAAARAAAAEgAAAAAAAAABAAAAAQAAAAEAAAABAQAA"
        "AQAAAAEAAAABAAAAAQEAAAEAAAABAQAAAQEAAAEBAAABAQAAAQEAAAEBAAABAAAAAQAAAAEBAAAAAAAAAgAAAAQAAAAAAAAA"
        "YzBjMQ=="
    ),
    "golden00.000001": (
        "TFJTRwEAAABNAAAAeyJzbG90cyI6MSwidGVybXMiOjcsInBvc3RpbmdzIjo3LCJpZHMiOiJ1dWlkIiwiaWRfYnl0ZXMiOjAs"
        "ImZpbGVzIjpbIm5vdGUiXX0AAAAAAAAAAAAAAAEAAAAHAAAAAAAAAAUAAAAAAAAAvmfe7QA7dEMJl3xEGdMUV9xeQndJY2R8"
        "UFblNAiqaZ9wnk2GTGiQr9/N+YZMvfWvPZVxY07UFdcAAAAAAQAAAAIAAAADAAAABAAAAAUAAAAGAAAABwAAAAEAAAABAAAA"
        "AQAAAAEAAAABAAAAAQAAAAEAAAAAAAAAbxwqUh1ZW46aRww+jxstRA=="
    ),
}


def _naming_tokeniser(manifest: bytes, version: int) -> bytes:
    body = json.loads(zlib.decompress(manifest[5:]))
    body["terms"] = version
    return manifest[:5] + zlib.compress(json.dumps(body).encode())


def test_a_snapshot_written_by_an_earlier_release_loads_and_answers_like_a_fresh_index():
    stored = {name: base64.b64decode(text) for name, text in _V1_SNAPSHOT.items()}
    back = SegmentIndex.load(_naming_tokeniser(stored.pop("manifest"), TERMS_VERSION), stored)
    fresh = SegmentIndex()
    fresh.add_file("manual", tokenize_chunks([("c0", "Zephyr-9 Manual\nDescaling takes 25 minutes.", "Zephyr-9 Manual"),
                                              ("c1", "泵阀检查 pump valve", "")]))
    fresh.add_file("note", tokenize_chunks([("6f1c2a52-1d59-5b8e-9a47-0c3e8f1b2d44", "valve 泵阀 warranty two years", "")]))
    for q in ("pump 泵阀 descaling warranty", "zephyr-9", "two years"):
        assert hit_tuples(back, q) == hit_tuples(fresh, q) != []


def test_a_snapshot_of_another_tokeniser_is_refused_so_its_files_are_indexed_again():
    stored = {name: base64.b64decode(text) for name, text in _V1_SNAPSHOT.items()}
    manifest = stored.pop("manifest")
    for refused in (manifest, _naming_tokeniser(manifest, TERMS_VERSION + 1)):
        with pytest.raises(ValueError, match="tokeniser"):
            SegmentIndex.load(refused, stored)
        with pytest.raises(ValueError, match="tokeniser"):
            SegmentIndex.manifest_segment_names(refused)


# -- removal with the file's chunks ------------------------------------------------------------------


def _moved_term(tokens: list[tuple[str, dict[str, int]]]) -> list[tuple[str, dict[str, int]]]:
    """The file's chunks with one term of chunk 0 claimed by chunk 1 instead (which lacks it) and
    one term of chunk 1 claimed by chunk 0: as many postings, every term known, but not the
    file's postings (e.g. chunks tokenised by another release)."""
    first, second = dict(tokens[0][1]), dict(tokens[1][1])
    a = next(t for t in first if t not in second)
    b = next(t for t in second if t not in first)
    second[a] = first.pop(a)
    first[b] = second.pop(b)
    return [(tokens[0][0], first), (tokens[1][0], second), *tokens[2:]]


def _foreign_term(c: Corpus, fid: str) -> list[tuple[str, dict[str, int]]]:
    """The file's chunks with one term replaced by a term only other files have."""
    mine = {t for _, tfs in c.tokens[fid] for t in tfs}
    other = next(t for f, toks in c.tokens.items() if f != fid for _, tfs in toks for t in tfs if t not in mine)
    first = dict(c.tokens[fid][0][1])
    first[other] = first.pop(next(iter(first)))
    return [(c.tokens[fid][0][0], first), *c.tokens[fid][1:]]


def _unknown_term(c: Corpus, fid: str) -> list[tuple[str, dict[str, int]]]:
    """The file's chunks with one term replaced by a term no file has."""
    first = dict(c.tokens[fid][0][1])
    first["zzyzx-unindexed"] = first.pop(next(iter(first)))
    return [(c.tokens[fid][0][0], first), *c.tokens[fid][1:]]


@pytest.mark.parametrize("wrong", ["moved", "foreign", "unknown"])
def test_removing_with_chunks_that_are_not_the_files_postings_still_leaves_exact_statistics(wrong):
    c = Corpus(43)
    for f in range(segindex.MERGE_FACTOR):  # one merged segment: common terms have df > 1 in it
        c.add(f"doc-{f}", n_chunks=4)
    target = "doc-3"
    given = {"moved": lambda: _moved_term(c.tokens[target]), "foreign": lambda: _foreign_term(c, target),
             "unknown": lambda: _unknown_term(c, target)}[wrong]()
    assert c.idx.remove_file(target, given)
    c.ref.remove(target)
    del c.files[target], c.tokens[target]
    assert_same_results(c.ref, c.idx, c.text_of())
    fresh = SegmentIndex()
    for fid, toks in c.tokens.items():
        fresh.add_file(fid, toks)
    for term in {t for _, tfs in given + c.tokens["doc-0"] for t in tfs}:
        assert c.idx.document_frequency(term) == fresh.document_frequency(term), term


@pytest.mark.parametrize("removed", ["doc-0", "doc-1"])
def test_a_tombstone_over_a_segments_first_posting_is_counted_at_load(monkeypatch, removed):
    """Whichever file holds the segment's first posting: the live df read back equals a fresh index's."""
    set_merge_factor(monkeypatch, 2)
    monkeypatch.setattr(segindex, "PURGE_DEAD_SHARE", 0.9)  # keep the tombstone
    c = Corpus(59)
    c.add("doc-0", n_chunks=3)
    c.add("doc-1", n_chunks=3)
    gone = c.tokens[removed]
    c.remove(removed)
    store: dict[str, bytes] = {}
    store_apply(store, c.idx.take_changes())
    back = restarted(store)
    assert back.stats()["dead_slots"] == 3
    (kept,) = c.tokens
    fresh = SegmentIndex()
    fresh.add_file(kept, c.tokens[kept])
    for term in {t for toks in (gone, c.tokens[kept]) for _, tfs in toks for t in tfs}:
        assert back.document_frequency(term) == fresh.document_frequency(term), term


# -- merges ------------------------------------------------------------------------------------------


def test_merging_a_segment_with_tombstones_behind_another_keeps_every_chunk_in_place(monkeypatch):
    set_merge_factor(monkeypatch, 3)
    monkeypatch.setattr(segindex, "BASE_POSTINGS", 16)
    c = Corpus(47)
    c.add("big", n_chunks=30)  # a level of its own
    for f, n in ((1, 2), (2, 1), (3, 2)):  # three small files: merged into one segment behind it
        c.add(f"doc-{f}", [(f"doc-{f}-{j}", f"{EN_WORDS[f + j]} {EN_WORDS[f * 3 + j]} pump", "") for j in range(n)])
    assert c.idx.stats()["segments"] == 2
    c.remove("doc-2")  # a tombstone in the second segment (1 of its 5 chunks: not purged alone)
    assert c.idx.stats()["dead_slots"] == 1
    set_merge_factor(monkeypatch, 2)
    monkeypatch.setattr(segindex, "BASE_POSTINGS", 1 << 20)
    c.idx.maintain()  # the two merge: the second's live chunks move behind the first's
    assert c.idx.stats()["segments"] == 1 and c.idx.stats()["dead_slots"] == 0
    queries = QUERIES + ["pump " + " ".join(EN_WORDS[:10])]
    assert_same_results(c.ref, c.idx, c.text_of(), queries=queries)
    store: dict[str, bytes] = {}
    store_apply(store, c.idx.take_changes())
    assert_same_results(c.ref, restarted(store), c.text_of(), queries=queries)


def test_files_without_keyword_terms_merge_and_survive_a_restart():
    idx = SegmentIndex()
    for f in range(segindex.MERGE_FACTOR):  # e.g. scans whose text had no indexable word
        idx.add_file(f"blank-{f}", tokenize_chunks([(f"b{f}", "…… —— !!!")]))
    assert idx.stats()["segments"] == 1 and len(idx) == segindex.MERGE_FACTOR
    assert idx.stats()["avgdl"] == 0.0 == SegmentIndex().stats()["avgdl"]
    changes = idx.take_changes()
    back = SegmentIndex.load(changes.manifest, changes.new_segments)
    assert back.file_ids() == idx.file_ids() and len(back) == len(idx) and back.search("anything", 5) == []


# -- scoring ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lookup_ratio", [0, 1 << 30])
def test_scores_below_one_are_exact_when_pruning(monkeypatch, lookup_ratio):
    """Terms in almost every chunk have an idf near 0, so every score is far below 1."""
    monkeypatch.setattr(segindex, "_LOOKUP_RATIO", lookup_ratio)
    c = Corpus(53)
    common = "pump valve seal flange rotor"
    for f in range(30):
        c.add(f"doc-{f}", [(f"doc-{f}-{j}", f"{common} {EN_WORDS[(f + j) % len(EN_WORDS)]} " * (1 + j), "")
                           for j in range(3)])
    top = c.idx.search(common, 3)
    assert top and all(0 < h.score < 1 for h in top)
    assert_same_results(c.ref, c.idx, c.text_of(), queries=[common, "pump valve", "seal rotor flange"])
