"""The relevance cut calibrated to the KB's own embedding model (state/probestats.py): each
everyday probe question's best cosine over the chunks ingested, kept while files are ingested, is
the background a question's best cosine is weighed against. A question the model reads as
unrelated to every passage is cut although it shares a word with the KB; without the statistics
(a KB ingested before them, or whose statistics storage lost) the cut is as before; the statistics
survive a restart, cost no host call per question once read, and a storage failure around them
fails neither an ingest nor a question."""

from __future__ import annotations

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from lucidrag.engine import Engine
from lucidrag.index.probes import ALL_PROBES, PROBES, language
from lucidrag.state.probestats import MIN_CHUNKS, ProbeMaxima
from lucidrag.state.storage_keys import probe_stats_key
from tests.conftest import MODEL, FakePlugin, Harness
from tests.test_relevance_cut import ANSWER_FILE, ANSWERED, FILES, KB, NOTES, answer, model_like, office_kb

# The model reads it as a question about a kettle's warranty; "lobby" is the only one of its words
# the KB holds (onboarding: "meet your buddy in the lobby").
SHARES_A_WORD = "What about the guitar lobby warranty?"
MEANING = {SHARES_A_WORD: "electric kettle warranty period"}
STATS_KEY = probe_stats_key(KB)


async def restarted(host: FakePlugin) -> Harness:
    """The plugin process restarted (nothing in memory, the same LangBot: storage, vectors, KBs),
    and the KB's state loaded by a first question (a keyword query waits for its index)."""
    host.engine = Engine()
    harness = Harness(host)
    await answer(harness, ANSWERED, search_mode="keyword")
    return harness


async def without_probe_stats(host: FakePlugin) -> Harness:
    """The KB as one ingested before the probe statistics existed (or whose statistics were lost)."""
    del host.storage[STATS_KEY]
    return await restarted(host)


@pytest.mark.parametrize("rerank", [False, True], ids=["no-rerank", "rerank"])
@pytest.mark.parametrize("baseline", [0.5, 0.8], ids=["unrelated-0.5-apart", "0.8-apart"])
@pytest.mark.parametrize("mode", ["vector", "hybrid"])
async def test_a_question_the_model_reads_as_unrelated_is_cut_by_the_kbs_background(mode, baseline, rerank):
    host, harness = await office_kb(baseline, rerank, meaning=MEANING)
    settings = {"search_mode": mode, **({"rerank_model_uuid": "rr"} if rerank else {})}
    assert await answer(harness, SHARES_A_WORD, **settings) == []
    results = await answer(harness, ANSWERED, **settings)
    assert results and results[0].metadata["file_id"] == ANSWER_FILE

    harness = await without_probe_stats(host)  # the cut without a background answers it, as before
    assert len(await answer(harness, SHARES_A_WORD, **settings)) == 5
    results = await answer(harness, ANSWERED, **settings)
    assert results and results[0].metadata["file_id"] == ANSWER_FILE


async def test_the_statistics_survive_a_restart_and_cost_one_storage_read_per_process():
    host, harness = await office_kb(0.5, rerank=False, meaning=MEANING)
    await harness.create("kb-next")  # the next upload, deletion or creation saves what the last upload added
    stats = ProbeMaxima.decode(host.storage[STATS_KEY])
    assert stats.chunks == len(host.engine.installation("dedicated").kb(KB).index) >= MIN_CHUNKS
    assert stats.model == MODEL
    assert all(len(stats.maxima[lang]) == len(PROBES[lang]) for lang in PROBES)

    read_before = host.reads[STATS_KEY]
    harness = await restarted(host)  # its first question reads the statistics
    assert host.reads[STATS_KEY] == read_before + 1
    before = host.calls.copy()
    assert await answer(harness, SHARES_A_WORD, search_mode="vector") == []
    assert host.reads[STATS_KEY] == read_before + 1
    calls = host.calls - before
    assert calls["invoke_embedding"] == 1  # the question's; the probes are not embedded to answer it


@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
async def test_the_background_costs_no_host_call_per_question(mode):
    host, harness = await office_kb(0.5, rerank=False, meaning=MEANING)
    await answer(harness, ANSWERED, search_mode=mode)
    read_before = host.reads[STATS_KEY]
    counts = []
    for cut in ("auto", "off"):
        before = host.calls.copy()
        await answer(harness, ANSWERED, search_mode=mode, relevance_cut=cut)
        counts.append({k: v for k, v in (host.calls - before).items() if k != "set_plugin_storage"})  # query log
    # keyword mode's cut asks the vector search (test_relevance_cut), with or without a background
    extra = {"invoke_embedding": 1, "vector_search": 1} if mode == "keyword" else {}
    assert counts[0] == {**counts[1], **{k: counts[1].get(k, 0) + v for k, v in extra.items()}}
    assert host.reads[STATS_KEY] == read_before  # this process ingested the KB: its statistics are in memory


async def test_the_probes_are_embedded_once_per_process_and_model_in_an_uploads_batch():
    embedded: list[str] = []
    embed = model_like(0.5)
    host = FakePlugin(embed=lambda text: embedded.append(text) or embed(text))
    harness = Harness(host)
    for kb in ("kb-a", "kb-b"):
        for i in range(2):
            await harness.ingest(kb, f"f{i}.txt", f"Note {i} of {kb}: the shelf holds {i} boxes.".encode())
    assert all(embedded.count(probe) == 1 for probe in ALL_PROBES)
    assert len(embedded) == 4 + len(ALL_PROBES)  # each file's chunk, and the probes once
    assert host.calls["invoke_embedding"] == 4  # in the first file's batch: no call of their own
    stats = host.engine.installation("dedicated").probe_stats
    assert stats["kb-a"].seen.chunks == stats["kb-b"].seen.chunks == 2


async def test_a_storage_failure_while_saving_the_statistics_fails_no_ingest():
    embed = model_like(0.5)
    host = FakePlugin(embed=lambda text: embed(MEANING.get(text, text)))
    host.fail("set_plugin_storage", when=lambda key: key == STATS_KEY)
    harness = Harness(host)
    for name, text in {**FILES, **NOTES}.items():
        assert (await harness.ingest(KB, name, text.encode(), document_id=name)).status == DocumentStatus.COMPLETED
    results = await answer(harness, ANSWERED, search_mode="hybrid")
    inst = host.engine.installation("dedicated")
    assert STATS_KEY not in host.storage
    # every upload after the first tried to save them (a question does not): each one was counted
    assert inst.bookkeeping.count == len(FILES) + len(NOTES) - 1 and "probe statistics" in inst.bookkeeping.last
    assert results and results[0].metadata["file_id"] == ANSWER_FILE
    assert await answer(harness, SHARES_A_WORD, search_mode="hybrid") == []  # kept in memory meanwhile
    host.faults.pop("set_plugin_storage")
    await harness.ingest(KB, "late.txt", b"Late note\n\nThe lobby plants are watered on Saturdays.")
    await harness.create("kb-next")
    assert ProbeMaxima.decode(host.storage[STATS_KEY]).chunks == len(inst.kb(KB).index)


async def test_unreadable_statistics_give_the_cut_without_a_background():
    host, harness = await office_kb(0.5, rerank=False, meaning=MEANING)
    host.fail("get_plugin_storage", when=lambda key: key == STATS_KEY)
    read_before = host.reads[STATS_KEY]
    harness = await restarted(host)
    assert len(await answer(harness, SHARES_A_WORD, search_mode="vector")) == 5
    assert host.engine.installation("dedicated").bookkeeping.count == 1
    await answer(harness, SHARES_A_WORD, search_mode="vector")
    assert host.reads[STATS_KEY] == read_before + 1  # not read again at once (READ_RETRY_S)


def test_a_question_is_compared_with_the_probes_of_its_language():
    assert language("What is the warranty period for the electric kettle?") == "en"
    assert language("电水壶的保修期是多久？") == "zh"
    assert language("LucidRAG 的 BM25 怎么设置？") == "zh"
    assert language("What does 保修 mean in the manual?") == "en"
