"""The relevance cut's anchor (state/openingstats.py): each of a KB's first files' opening sentence
stands for a question that file answers, and its best cosine over the other files' chunks shows
how close a question on the KB's subject comes to passages that do not answer it. A question whose
best cosine lies barely above the everyday probes' background, far below that anchor, is cut;
without the anchor (statistics saved before it, or too few files) the cut is as before. The
openings ride in the uploads' embedding batches and are kept with the probe statistics: no host
call of their own, none per question."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lucidrag.engine import Engine
from lucidrag.index.probes import ALL_PROBES, opening_question
from lucidrag.state.openingstats import MAX_OPENINGS, MIN_COMPARED, MIN_OPENINGS, LiveOpenings, Openings
from lucidrag.state.probestats import ProbeMaxima
from lucidrag.state.storage_keys import probe_stats_key
from tests.conftest import FakePlugin, Harness
from tests.test_relevance_cut import ANSWER_FILE, ANSWERED, FILES, KB, NOTES, answer, model_like

# The model reads it as about a kettle on some floor: closer to the office notes ("The second floor
# office coffee machine is descaled on Thursdays") than everyday questions come, far less close
# than one note's opening comes to another note.
NEAR_THE_BACKGROUND = "Is the kettle warranty kept at reception?"
MEANING = {NEAR_THE_BACKGROUND: "floor kettle"}
STATS_KEY = probe_stats_key(KB)


async def notes_kb(baseline: float, rerank: bool = False) -> tuple[FakePlugin, Harness]:
    """The office KB, its two dozen notes uploaded first: enough openings compared with enough
    later chunks (MIN_OPENINGS, MIN_COMPARED) for an anchor."""
    embed = model_like(baseline)
    host = FakePlugin(embed=lambda text: embed(MEANING.get(text, text)))
    host.rerank_fn = (lambda query, documents: [0.5] * len(documents)) if rerank else None
    harness = Harness(host)
    for name, text in {**NOTES, **FILES}.items():
        await harness.ingest(KB, name, text.encode(), document_id=name)
    await harness.create("kb-next")  # the next hook saves what the last upload added
    return host, harness


async def restarted(host: FakePlugin) -> Harness:
    host.engine = Engine()
    harness = Harness(host)
    await answer(harness, ANSWERED, search_mode="keyword")  # the KB's state loaded
    return harness


@pytest.mark.parametrize("rerank", [False, True], ids=["no-rerank", "rerank"])
@pytest.mark.parametrize("baseline", [0.5, 0.8], ids=["unrelated-0.5-apart", "0.8-apart"])
@pytest.mark.parametrize("mode", ["vector", "hybrid"])
async def test_a_question_far_below_the_kbs_anchor_is_cut_although_above_its_background(mode, baseline, rerank):
    host, harness = await notes_kb(baseline, rerank)
    settings = {"search_mode": mode, **({"rerank_model_uuid": "rr"} if rerank else {})}
    assert await answer(harness, NEAR_THE_BACKGROUND, **settings) == []
    results = await answer(harness, ANSWERED, **settings)
    assert results and results[0].metadata["file_id"] == ANSWER_FILE

    # statistics saved before the anchor existed: the probe background alone answers it, as before
    value = json.loads(host.storage[STATS_KEY])
    del value["openings"]
    host.storage[STATS_KEY] = json.dumps(value).encode()
    harness = await restarted(host)
    assert len(await answer(harness, NEAR_THE_BACKGROUND, **settings)) == 5
    results = await answer(harness, ANSWERED, **settings)
    assert results and results[0].metadata["file_id"] == ANSWER_FILE


async def test_the_openings_ride_in_the_upload_batches_and_are_kept_with_the_probe_statistics():
    embedded: list[str] = []
    embed = model_like(0.5)
    host = FakePlugin(embed=lambda text: embedded.append(text) or embed(MEANING.get(text, text)))
    harness = Harness(host)
    files = {**NOTES, **FILES}
    for name, text in files.items():
        await harness.ingest(KB, name, text.encode(), document_id=name)
    assert host.calls["invoke_embedding"] == len(files)  # one batch per file, as without openings
    openings = {name: opening_question(text.split("\n\n", 1)[1]) for name, text in NOTES.items()}
    assert all(embedded.count(sentence) == 1 for sentence in openings.values())
    inst = host.engine.installation("dedicated")
    seen = inst.probe_stats[KB].seen.openings.best
    assert set(seen) == set(files)  # fewer files than MAX_OPENINGS: every one's
    assert seen["note-0.txt"][1] == len(inst.kb(KB).index) - 1  # compared with every later chunk
    assert seen["faq.md"] == (0.0, 0)  # the last file's opening: nothing came after it
    await harness.create("kb-next")
    stored = ProbeMaxima.decode(host.storage[STATS_KEY]).openings
    counted = sorted(cosine for cosine, chunks in seen.values() if chunks >= MIN_COMPARED)
    assert sorted(cosine for cosine, _ in stored.kept) == pytest.approx(counted, abs=1e-4)  # only those that count
    assert stored.anchor() == pytest.approx(inst.probe_stats[KB].seen.openings.anchor(), abs=1e-4)

    read_before = host.reads[STATS_KEY]
    harness = await restarted(host)  # its first question reads the statistics, anchor included
    assert host.reads[STATS_KEY] == read_before + 1
    for cut in ("auto", "off"):
        before = host.calls.copy()
        await answer(harness, NEAR_THE_BACKGROUND, search_mode="hybrid", relevance_cut=cut)
        calls = {k: v for k, v in (host.calls - before).items() if k != "set_plugin_storage"}  # query log
        assert calls == {"invoke_embedding": 1, "vector_search": 1}
    assert host.reads[STATS_KEY] == read_before + 1


async def test_only_a_processs_first_uploads_of_a_kb_embed_an_opening():
    embedded: list[str] = []
    host = FakePlugin(embed=lambda text: embedded.append(text) or model_like(0.5)(text))
    harness = Harness(host)
    for i in range(MAX_OPENINGS + 2):
        await harness.ingest(KB, f"f{i}.txt", f"Shelf {i}\n\nShelf number {i} holds {i} boxes of paper.".encode())
    assert len(embedded) == (MAX_OPENINGS + 2) + MAX_OPENINGS + len(ALL_PROBES)  # chunks, openings, probes


def test_an_opening_is_compared_with_later_files_chunks_only_and_not_its_own():
    live = LiveOpenings()
    a, b = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    assert live.observe("m", "f1", np.stack([a]), a).best == {"f1": (0.0, 0)}
    found = live.observe("m", "f2", np.stack([b, (a + b) / np.sqrt(2)]), b).best
    assert found["f1"] == (pytest.approx(np.sqrt(0.5)), 2) and found["f2"] == (0.0, 0)
    assert set(live.observe("m", "f2", np.stack([b]), b).best) == {"f1", "f2"}  # a new version: f1 compared
    assert live.observe("other-model", "f3", np.stack([a]), None).best == {}  # another model's are dropped


def test_the_anchor_needs_enough_openings_compared_with_enough_chunks():
    enough = Openings({f"f{i}": (round(0.5 + i / 100, 2), MIN_COMPARED) for i in range(MIN_OPENINGS)})
    assert enough.anchor() == pytest.approx(0.5 + (MIN_OPENINGS - 1) / 200)
    assert Openings({**enough.best, "f0": (0.5, MIN_COMPARED - 1)}).anchor() is None
    many = Openings({f"g{i}": (0.9, 1000 + i) for i in range(MAX_OPENINGS)}).merged(enough)
    assert set(many.best) == {f"g{i}" for i in range(MAX_OPENINGS)}  # the most compared are kept
    assert Openings({"f": (0.4, 10)}).merged(Openings({"f": (0.6, 15)})).best == {"f": (0.6, 25)}
    stored = Openings.from_json(json.loads(json.dumps(Openings({**enough.best, "new": (0.9, 3)}).to_json())))
    assert stored.anchor() == enough.anchor() and len(stored.kept) == MIN_OPENINGS  # "new" would never count
    mixed = stored.merged(Openings({f"h{i}": (0.1, MIN_COMPARED + 1) for i in range(MAX_OPENINGS - 2)}))
    assert len(mixed.best) == MAX_OPENINGS - 2 and len(mixed.kept) == 2  # compared with more chunks first


def test_an_opening_question_is_a_files_first_sentence():
    assert opening_question("The hopper holds 250 grams.  Close the shutter first.") == "The hopper holds 250 grams."
    first = "新员工第一天上午九点到前台领取工牌，并在大厅与导师见面。"
    assert opening_question(first + "信息技术部当天上午发放笔记本电脑。") == first
    assert opening_question("年假二十五天。" + first) == "年假二十五天。" + first  # too short alone
    assert opening_question("Prices " * 60) == ("Prices " * 60)[:200]
