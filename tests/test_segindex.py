"""lucidrag.index.segindex: the persisted segment index scores exactly like keyword.BM25Index (the
reference), stays exact through removes, merges and restarts, and rejects snapshots it cannot trust."""

from __future__ import annotations

import json
import math
import random
import zlib

import pytest

from lucidrag.index import segindex
from lucidrag.index.segindex import SegmentIndex
from lucidrag.index.terms import tokenize_chunks
from lucidrag.state.records import chunk_uuid
from tests.reference_bm25 import BM25Index, coverages

# the tests below persist every segment; those of the threshold set it themselves
pytestmark = pytest.mark.usefixtures("persist_every_segment")

EN = ("pump valve bearing gasket rotor seal flange impeller firmware controller relay breaker cable "
      "descaling warranty cleaning boiler pressure sensor timeout retry gateway router install "
      "restart backup restore invoice delivery").split()
ZH = "泵阀轴承密封检查温度压力设备维修保养更换故障报警电源开关控制系统数据网络"
CODES = ["ERR-503", "PX-1042", "v2.3.1", "QT-7", "A_1024", "sha256", "Zephyr-9"]
HEADINGS = ["Installation", "Descaling", "Warranty", "安装说明", "故障排除", "Cleaning PX-1042"]


def _sentence(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.5:
        words = [rng.choice(EN) for _ in range(rng.randint(3, 14))]
        if rng.random() < 0.4:
            words.insert(rng.randrange(len(words)), rng.choice(CODES))
        return " ".join(words).capitalize() + "."
    if kind < 0.8:
        return "".join(rng.choice(ZH) for _ in range(rng.randint(4, 20))) + "。"
    return f"{rng.choice(EN)} {rng.choice(CODES)} {''.join(rng.choice(ZH) for _ in range(3))} {rng.choice(EN)}"


def make_file(rng: random.Random, fid: str, n_chunks: int | None = None, uuids: bool = True) -> list[tuple[str, str, str]]:
    """A file's chunks as the plugin indexes them: (chunk id, heading line + body, heading)."""
    title = f"{rng.choice(['Zephyr-9', 'Aurora-3', '维修手册', 'Router'])} Manual"
    out = []
    for j in range(rng.randint(1, 6) if n_chunks is None else n_chunks):
        heading = f"{title} › {rng.choice(HEADINGS)}"
        body = " ".join(_sentence(rng) for _ in range(rng.randint(1, 5)))
        cid = chunk_uuid(fid, j) if uuids else f"{fid}#chunk{j}"
        out.append((cid, f"{heading}\n{body}", heading))
    return out


QUERIES = ["pump valve", "descaling boiler", "泵阀检查", "ERR503 warranty", "px 1042 温度", "Zephyr-9 descaling",
           "how do I restart the router", "维修手册", "a", "sha256 firmware 控制系统", "seal", "安装",
           " ".join(EN) + " " + ZH]  # the last one has more than MAX_QUERY_TERMS terms


class Corpus:
    """Files with their texts and tokens; a reference BM25Index and the SegmentIndex under test."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.files: dict[str, list[tuple[str, str, str]]] = {}
        self.tokens: dict[str, list] = {}
        self.ref = BM25Index()
        self.idx = SegmentIndex()

    def add(self, fid: str, chunks: list[tuple[str, str, str]] | None = None, **kw) -> None:
        chunks = make_file(self.rng, fid, **kw) if chunks is None else chunks
        self.files[fid] = chunks
        self.tokens[fid] = tokenize_chunks(chunks)
        self.ref.add_tokenized(fid, self.tokens[fid])
        self.idx.add_file(fid, self.tokens[fid])

    def remove(self, fid: str, with_chunks: bool = True) -> None:
        assert self.ref.remove(fid)
        assert self.idx.remove_file(fid, self.tokens[fid] if with_chunks else None)
        del self.files[fid], self.tokens[fid]

    def text_of(self) -> dict[str, tuple[str, str, str]]:
        return {cid: (text, heading, fid) for fid, chunks in self.files.items() for cid, text, heading in chunks}


def assert_same_results(ref: BM25Index, idx: SegmentIndex, texts: dict[str, tuple[str, str, str]],
                        file_ids: set[str] | None = None, queries: list[str] = QUERIES) -> None:
    for q in queries:
        for k in (1, 5, 10_000):
            want = ref.search(q, k, file_ids)
            got = idx.search(q, k, file_ids)
            assert len(got) == len(want), (q, k)
            for (_, ws), h in zip(want, got):
                assert math.isclose(h.score, ws, rel_tol=1e-9), (q, k)
            # the same chunks, except where equal scores straddle the cut
            cut = want[-1][1] if len(want) == k else -1.0
            assert ({c for c, s in want if s > cut + 1e-9}
                    == {h.chunk_id for h in got if h.score > cut + 1e-9}), (q, k)
            if len(want) < k:
                assert {c for c, _ in want} == {h.chunk_id for h in got}
            weights = ref.term_weights(q)
            assert idx.term_weights(q) == pytest.approx(weights, rel=1e-12)
            for h in got:
                if file_ids is not None:
                    assert h.file_id in file_ids
                text, heading, fid = texts[h.chunk_id]
                assert h.file_id == fid
                assert (h.coverage, h.body_coverage) == pytest.approx(coverages(weights, text, heading), rel=1e-12)


def hit_tuples(idx: SegmentIndex, q: str, k: int = 10_000, file_ids: set[str] | None = None) -> list[tuple]:
    return [(h.chunk_id, h.file_id, h.score, h.coverage, h.body_coverage) for h in idx.search(q, k, file_ids)]


@pytest.fixture
def small_merges(monkeypatch):
    """Merge thresholds scaled down so a test-sized corpus goes through several merge levels."""
    monkeypatch.setattr(segindex, "BASE_POSTINGS", 16)
    monkeypatch.setattr(segindex, "MERGE_FACTOR", 3)
    monkeypatch.setattr(segindex, "PERSISTED_MERGE_FACTOR", 3)
    monkeypatch.setattr(segindex, "MAX_SEGMENT_POSTINGS", 4000)


# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lookup_ratio", [0, 8, 1 << 30])  # MaxScore's look-ups: never, sometimes, always one pass
def test_scores_order_and_coverage_equal_the_reference_index(small_merges, monkeypatch, lookup_ratio):
    monkeypatch.setattr(segindex, "_LOOKUP_RATIO", lookup_ratio)
    c = Corpus()
    for f in range(80):
        c.add(f"doc-{f}", uuids=f % 4 != 0)
    assert c.idx.stats()["segments"] < 40  # merged
    assert len(c.idx) == len(c.ref) and c.idx.file_ids() == c.ref.file_ids()
    assert_same_results(c.ref, c.idx, c.text_of())


def test_filter_restricts_results_but_keeps_global_statistics(small_merges):
    c = Corpus(3)
    for f in range(40):
        c.add(f"doc-{f}")
    for allowed in ({"doc-3"}, {"doc-1", "doc-17", "doc-39"}, {"missing"}, set(), set(c.files)):
        assert_same_results(c.ref, c.idx, c.text_of(), file_ids=allowed)
    one = c.idx.search("pump valve 泵阀", 10_000, {"doc-5"})
    everything = {h.chunk_id: h.score for h in c.idx.search("pump valve 泵阀", 10_000)}
    assert all(h.score == everything[h.chunk_id] for h in one)


def test_remove_leaves_df_n_and_avgdl_of_the_remaining_files(small_merges):
    c = Corpus(11)
    for f in range(60):
        c.add(f"doc-{f}")
    for f in range(0, 60, 3):
        c.remove(f"doc-{f}", with_chunks=f % 2 == 0)
    fresh = BM25Index()
    for fid, toks in c.tokens.items():
        fresh.add_tokenized(fid, toks)
    assert len(c.idx) == len(fresh)
    assert_same_results(fresh, c.idx, c.text_of())
    assert not any(h.file_id.endswith(("-0", "-3")) for h in c.idx.search(" ".join(EN), 10_000))


def test_remove_re_add_and_unknown_files(small_merges):
    c = Corpus(5)
    for f in range(30):
        c.add(f"doc-{f}")
    with pytest.raises(ValueError):
        c.idx.add_file("doc-4", c.tokens["doc-4"])
    assert c.idx.remove_file("nope", None) is False
    assert c.idx.chunk_count("doc-4") == len(c.files["doc-4"])
    for f in (4, 9, 4):
        if f"doc-{f}" in c.files:
            c.remove(f"doc-{f}")
        c.add(f"doc-{f}")  # new content under the same id
        assert_same_results(c.ref, c.idx, c.text_of())
    assert "doc-4" in c.idx and "nope" not in c.idx


def test_remove_without_chunks_or_with_wrong_chunks_equals_remove_with_chunks(small_merges):
    runs = []
    for how in ("chunks", "none", "wrong"):
        c = Corpus(21)
        for f in range(40):
            c.add(f"doc-{f}")
        for f in range(0, 40, 4):
            fid = f"doc-{f}"
            toks = {"chunks": c.tokens[fid], "none": None,
                    "wrong": [(cid, {"unrelated": 1}) for cid, _ in c.tokens[fid]]}[how]
            assert c.idx.remove_file(fid, toks)
            c.ref.remove(fid)
            del c.files[fid], c.tokens[fid]
        assert_same_results(c.ref, c.idx, c.text_of())
        runs.append([hit_tuples(c.idx, q) for q in QUERIES])
    assert runs[0] == runs[1] == runs[2]


def test_a_title_shared_by_every_chunk_counts_less_than_the_body():
    idx = SegmentIndex()
    title = "Zephyr-9 Manual"
    idx.add_file("zephyr", tokenize_chunks([(f"z{i}", f"{title}\n{body}", title) for i, body in enumerate(
        ["Unpack and place on a flat surface.", "Descaling takes 25 minutes.", "Two years warranty."])]))
    idx.add_file("kettle", tokenize_chunks([("k0", "Kettle Manual\nDescaling with vinegar takes an hour.",
                                             "Kettle Manual")]))
    assert idx.search("zephyr-9 descaling", 4)[0].chunk_id == "z1"  # title and body beat body alone
    ranked = [h.chunk_id for h in idx.search("zephyr-9 warranty", 4)]
    assert ranked[0] == "z2" and "k0" not in ranked
    z0 = next(h for h in idx.search("zephyr-9 warranty", 4) if h.chunk_id == "z0")
    assert z0.coverage > 0 and z0.body_coverage == 0.0  # matched by its title only


def store_apply(store: dict[str, bytes], changes: segindex.IndexChanges) -> None:
    """What plugin storage does with the changes: new segments, then the manifest, then deletes."""
    store.update(changes.new_segments)
    store["manifest"] = changes.manifest
    for name in changes.dropped_segments:
        del store[name]


def restarted(store: dict[str, bytes]) -> SegmentIndex:
    names = SegmentIndex.manifest_segment_names(store["manifest"])
    assert set(names) == set(store) - {"manifest"}  # nothing missing, nothing orphaned
    return SegmentIndex.load(store["manifest"], {n: store[n] for n in names})


def test_a_restart_after_every_change_answers_exactly_like_the_live_index(small_merges):
    c = Corpus(99)
    store: dict[str, bytes] = {}
    rng = random.Random(5)
    saw_merge = saw_drop = False
    for step in range(70):
        if c.files and rng.random() < 0.35:
            c.remove(rng.choice(sorted(c.files)), with_chunks=rng.random() < 0.5)
        else:
            c.add(f"doc-{step}")
        changes = c.idx.take_changes()
        saw_drop = saw_drop or bool(changes.dropped_segments)
        saw_merge = saw_merge or c.idx.stats()["segments"] < c.idx.stats()["files"] - 3
        store_apply(store, changes)
        back = restarted(store)
        for key in ("chunks", "files", "segments", "terms", "postings", "dead_slots", "avgdl"):
            assert back.stats()[key] == c.idx.stats()[key], key
        assert len(back) == len(c.idx) and back.file_ids() == c.idx.file_ids()
        for q in QUERIES[:8]:
            assert hit_tuples(back, q) == hit_tuples(c.idx, q)
            assert back.term_weights(q) == c.idx.term_weights(q)
        if step % 10 == 0:
            assert_same_results(c.ref, back, c.text_of(), queries=QUERIES[:6])
            c.idx = back  # carry on from the restarted index: its changes must persist as well
    assert saw_drop and saw_merge
    assert len(store["manifest"]) < 4096


def test_tombstones_survive_a_restart_and_merges_drop_them(small_merges):
    c = Corpus(8)
    for f in range(30):
        c.add(f"doc-{f}")
    store: dict[str, bytes] = {}
    store_apply(store, c.idx.take_changes())
    seg_count = c.idx.stats()["segments"]
    n0 = c.idx.chunk_count("doc-0")
    c.remove("doc-0")  # in the oldest, largest segment: a tombstone
    assert c.idx.stats()["dead_slots"] == n0 > 0
    store_apply(store, c.idx.take_changes())
    back = restarted(store)
    assert back.stats()["dead_slots"] == c.idx.stats()["dead_slots"] > 0
    assert_same_results(c.ref, back, c.text_of())
    for f in range(1, 20):  # removing most of the big segment purges it
        c.remove(f"doc-{f}")
    stats = c.idx.stats()
    assert stats["dead_slots"] <= segindex.PURGE_DEAD_SHARE * stats["chunks"] + 10
    changes = c.idx.take_changes()
    assert changes.dropped_segments and changes.new_segments  # rewritten without the dead slots
    store_apply(store, changes)
    assert c.idx.stats()["segments"] <= seg_count
    assert_same_results(c.ref, restarted(store), c.text_of())


def test_removing_every_file_leaves_an_empty_index_and_storage():
    c = Corpus(2)
    store: dict[str, bytes] = {}
    for f in range(12):
        c.add(f"doc-{f}")
        store_apply(store, c.idx.take_changes())
    for f in range(12):
        c.remove(f"doc-{f}")
    store_apply(store, c.idx.take_changes())
    assert set(store) == {"manifest"}
    back = restarted(store)
    assert len(back) == 0 and back.search("pump", 10) == [] and back.stats()["segments"] == 0


def test_everything_re_delivers_all_live_segments(small_merges):
    c = Corpus(4)
    for f in range(20):
        c.add(f"doc-{f}")
    c.idx.take_changes()  # pretend the write failed
    again = c.idx.take_changes(everything=True)
    assert set(again.new_segments) == set(SegmentIndex.manifest_segment_names(again.manifest))
    back = SegmentIndex.load(again.manifest, again.new_segments)
    assert hit_tuples(back, "pump valve") == hit_tuples(c.idx, "pump valve")


def test_load_rejects_garbage_and_a_missing_or_altered_segment():
    c = Corpus(6)
    for f in range(5):
        c.add(f"doc-{f}")
    changes = c.idx.take_changes()
    segs = changes.new_segments
    for bad in (b"", b"garbage", b"LRSM\x01not zlib", changes.manifest[:-3], "text"):
        with pytest.raises(ValueError):
            SegmentIndex.manifest_segment_names(bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            SegmentIndex.load(bad, segs)  # type: ignore[arg-type]
    name = next(iter(segs))
    with pytest.raises(ValueError, match="missing"):
        SegmentIndex.load(changes.manifest, {k: v for k, v in segs.items() if k != name})
    flipped = bytearray(segs[name])
    flipped[-1] ^= 0xFF
    with pytest.raises(ValueError, match="does not match"):
        SegmentIndex.load(changes.manifest, {**segs, name: bytes(flipped)})
    with pytest.raises(ValueError, match="does not match"):
        SegmentIndex.load(changes.manifest, {**segs, name: segs[name][:-8]})
    with pytest.raises(ValueError):
        segindex._Segment.from_bytes("x", segs[name][:40])
    assert len(SegmentIndex.load(changes.manifest, segs)) == len(c.idx)


def test_empty_files_and_empty_queries():
    idx = SegmentIndex()
    idx.add_file("empty", [])
    assert "empty" in idx and len(idx) == 0 and idx.chunk_count("empty") == 0
    assert idx.search("anything", 5) == [] and idx.search("", 5) == [] and idx.search("pump", 0) == []
    idx.add_file("one", tokenize_chunks([("c1", "pump valve")]))
    assert [h.chunk_id for h in idx.search("pump", 5)] == ["c1"]
    assert idx.search("pump", 5, {"empty"}) == []
    ch = idx.take_changes()
    back = SegmentIndex.load(ch.manifest, ch.new_segments)
    assert back.file_ids() == {"empty", "one"} and back.remove_file("empty", [])


def _tampered(manifest: bytes, change) -> bytes:
    body = json.loads(zlib.decompress(manifest[5:]))
    change(body)
    return manifest[:5] + zlib.compress(json.dumps(body).encode())


def test_load_rejects_a_manifest_that_does_not_fit_its_segments():
    c = Corpus(12)
    for f in range(6):
        c.add(f"doc-{f}")
    ch = c.idx.take_changes()
    segs = ch.new_segments
    first = lambda body: body["segments"][0]  # noqa: E731
    for change in (lambda b: first(b).update(dead=[99]),  # a tombstone for a file the segment lacks
                   lambda b: b["segments"].append(dict(first(b))),  # the same segment twice
                   lambda b: first(b).update(crc=first(b)["crc"] ^ 1),
                   lambda b: first(b).pop("bytes")):
        with pytest.raises(ValueError):
            SegmentIndex.load(_tampered(ch.manifest, change), segs)
    assert SegmentIndex.load(_tampered(ch.manifest, lambda b: None), segs).file_ids() == c.idx.file_ids()
    assert c.idx.chunk_count("missing") == 0 and "missing" not in c.idx


def in_memory_postings(idx: SegmentIndex) -> int:
    return sum(s.live_postings for s in idx._segments if not s.durable)


def test_small_segments_stay_in_memory_until_together_they_reach_the_persist_threshold(small_merges, monkeypatch):
    monkeypatch.setattr(segindex, "PERSIST_POSTINGS", 400)
    c = Corpus(31)
    store: dict[str, bytes] = {}
    flushes = 0
    rng = random.Random(3)
    for step in range(60):
        if c.files and rng.random() < 0.2:
            c.remove(rng.choice(sorted(c.files)))
        else:
            c.add(f"doc-{step}")
        changes = c.idx.take_changes()
        flushes += bool(changes.new_segments)
        assert in_memory_postings(c.idx) < 400  # what a restart indexes again is bounded
        if changes.manifest_changed:
            store_apply(store, changes)
        else:
            assert not changes.new_segments and not changes.dropped_segments
        back = restarted(store)
        persisted = back.file_ids()
        assert persisted <= c.idx.file_ids()
        for fid in sorted(c.idx.file_ids() - persisted):  # what a restart does: index them from their records
            back.add_file(fid, c.tokens[fid])
        assert back.file_ids() == c.idx.file_ids() and len(back) == len(c.idx)
        if step % 10 == 9:
            assert_same_results(c.ref, back, c.text_of(), queries=QUERIES[:6])
    assert flushes >= 3


def test_segments_built_after_a_restart_never_take_the_name_of_one_a_crash_left_behind():
    c = Corpus(17)
    store: dict[str, bytes] = {}
    c.add("doc-0")
    store_apply(store, c.idx.take_changes())
    c.add("doc-1")
    orphan = set(c.idx.take_changes().new_segments)  # written, but the manifest was not: a crash
    assert orphan
    back = restarted(store)
    back.add_file("doc-1", c.tokens["doc-1"])
    assert not set(back.take_changes().new_segments) & orphan
