"""A question no file of the knowledge base answers gets no passages (retrieval/relevance.py), in
every search mode, with and without a rerank model, whatever the embedding model's baseline; a
question a file answers still gets it; `score_threshold` still works; the cut costs no host call
in vector and hybrid mode, and keyword mode's one embedding and search."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from typing import Any

import pytest

from lucidrag.base.errors import SettingsError
from lucidrag.base.settings import parse_retrieval_settings
from lucidrag.engine import Engine
from lucidrag.retrieval.relevance import DEPTH, Evidence, judge
from lucidrag.state.storage_keys import probe_stats_key
from tests.conftest import FakePlugin, Harness
from tests.fakes import hash_embed

KB = "kb-office"
# The knowledge base of issue 40: a coffee grinder manual, a price list, a notice, an onboarding
# guide and an FAQ.
FILES = {
    "grinder.md": """# Coffee grinder manual

## Cleaning the burrs

Unplug the grinder, lift out the upper burr and brush the coffee grounds from both burrs weekly.

## Grind settings

Turn the dial towards fine for espresso and towards coarse for filter coffee or a French press.

## Hopper

The hopper holds 250 grams of beans; close the shutter before removing it.
""",
    "prices.md": """# Price list 2026

## Beans

House blend 12.50 per bag; single origin Ethiopia 16.00 per bag; decaf 13.00 per bag.

## Machines

Espresso machine rental 40.00 per month including two service visits.
""",
    "notice.txt": "Car park notice\n\nThe car park on level two is closed for resurfacing from 3 to 7 March; use level three.",
    "onboarding.md": """# New staff onboarding

## First day

Collect your badge at reception at nine and meet your buddy in the lobby.

## Holidays

Every employee has 25 days of annual leave; book them in the HR portal two weeks ahead.

## Laptops

IT hands out laptops on the first morning; report a broken screen to the helpdesk.
""",
    "faq.md": """# Office FAQ

## Where do I print?

Printers are on every floor next to the lifts; scan your badge to release a print job.

## Can I bring my dog?

Dogs are welcome on Fridays if they stay in the open plan area.

## How do I book a meeting room?

Use the room calendar in the HR portal; rooms hold six to twenty people.
""",
}
# ... and the office's notes, so that the knowledge base has a background: a word such as
# "office" occurs in many passages.
NOTES = {f"note-{i}.txt": f"Office note {i}\n\nThe {floor} floor office {thing} on {day}."
         for i, (floor, thing, day) in enumerate(
             (floor, thing, day)
             for floor in ("first", "second", "third", "fourth")
             for thing, day in (("coffee corner is restocked", "Mondays"), ("plants are watered", "Tuesdays"),
                                ("windows are cleaned", "Wednesdays"), ("coffee machine is descaled", "Thursdays"),
                                ("recycling is collected", "Fridays"), ("fire drill takes place", "the first Monday")))}
UNANSWERED = "What is the warranty period for the electric kettle?"
# shares "office" with two dozen passages (all the notes), and nothing else
UNANSWERED_SHARING_WORDS = "What is the warranty period for the office kettle?"
ANSWERED = "How do I clean the burrs of the coffee grinder?"
ANSWER_FILE = "grinder.md"

_STOP = frozenset("a an and are at be by can do does for from how i in is it my of on or the to what when "
                  "where which who why with you your".split())


def model_like(baseline: float) -> Callable[[str], list[float]]:
    """An embedding model whose unrelated texts lie about `baseline` apart (cosine): each text's
    content words (tests.fakes.hash_embed over 256 slots, function words left out, as a model
    that reads meaning does) and some noise of its own (unrelated texts are not all equally far
    apart), plus one component every text shares: cos = baseline + (1 − baseline) × the rest's."""
    def embed(text: str) -> list[float]:
        words = hash_embed(" ".join(w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP) or text, 256)
        noise = random.Random(text).choices((-1.0, 1.0), k=256)
        own = [w + 0.7 * n / 16 for w, n in zip(words, noise)]
        norm = math.sqrt(sum(x * x for x in own))
        return [math.sqrt(1.0 - baseline) * x / norm for x in own] + [math.sqrt(baseline)]
    return embed


def overlap_rerank(query: str, documents: list[str]) -> list[float]:
    words = set(re.findall(r"[a-z]+", query.lower())) - _STOP
    return [len(words & set(re.findall(r"[a-z]+", d.lower()))) / max(1, len(words)) for d in documents]


async def office_kb(baseline: float, rerank: bool,
                    meaning: dict[str, str] | None = None) -> tuple[FakePlugin, Harness]:
    """The office KB; `meaning` maps a question to what the embedding model reads in it."""
    embed = model_like(baseline)
    host = FakePlugin(embed=lambda text: embed((meaning or {}).get(text, text)))
    host.rerank_fn = overlap_rerank if rerank else None
    harness = Harness(host)
    for name, text in {**FILES, **NOTES}.items():
        await harness.ingest(KB, name, text.encode(), document_id=name)
    return host, harness


async def answer(harness: Harness, question: str, **settings: Any) -> list[Any]:
    response = await harness.retrieve(KB, question, settings={"top_k": 5, **settings})
    assert not (response.metadata or {}).get("error")
    return list(response.results)


MODES = ["vector", "keyword", "hybrid"]


@pytest.mark.parametrize("rerank", [False, True], ids=["no-rerank", "rerank"])
@pytest.mark.parametrize("baseline", [0.1, 0.5, 0.8], ids=["unrelated-0.1-apart", "0.5-apart", "0.8-apart"])
@pytest.mark.parametrize("mode", MODES)
async def test_an_unanswered_question_gets_nothing_and_an_answered_one_its_passage(mode, baseline, rerank):
    _, harness = await office_kb(baseline, rerank)
    settings = {"search_mode": mode, **({"rerank_model_uuid": "rr"} if rerank else {})}
    assert await answer(harness, UNANSWERED, **settings) == []
    assert await answer(harness, UNANSWERED_SHARING_WORDS, **settings) == []
    results = await answer(harness, ANSWERED, **settings)
    assert results and results[0].metadata["file_id"] == ANSWER_FILE


# Its only word in the knowledge base is "lobby" (onboarding: "meet your buddy in the lobby"), which
# few passages hold, so the keyword search alone ranks that passage first by a clear lead.
PASSING_WORD = "Does the warranty of the electric kettle cover limescale damage found in the lobby?"


@pytest.mark.parametrize("rerank", [False, True], ids=["no-rerank", "rerank"])
@pytest.mark.parametrize("mode", MODES)
async def test_a_question_that_shares_only_a_passing_word_gets_nothing_in_every_mode(mode, rerank):
    """The model reads the question as being about a kettle's warranty, which no passage is about:
    its best passage does not stand out, the words that make it specific occur nowhere, and the two
    searches do not agree on a passage. Keyword mode judges by the same evidence (it asks the vector
    search too), not by the lobby passage's lead in the keyword list alone."""
    _, harness = await office_kb(0.5, rerank, meaning={PASSING_WORD: "electric kettle warranty period"})
    settings = {"search_mode": mode, **({"rerank_model_uuid": "rr"} if rerank else {})}
    assert await answer(harness, PASSING_WORD, **settings) == []
    assert len(await answer(harness, PASSING_WORD, **settings, relevance_cut="off")) >= 1
    results = await answer(harness, ANSWERED, **settings)
    assert results and results[0].metadata["file_id"] == ANSWER_FILE


async def test_keyword_mode_weighs_the_same_evidence_against_its_own_lower_bar():
    """Its BM25 ranking alone answers some questions the vector search finds nothing for, so keyword
    mode answers from KEYWORD_MODE_BAR: a question between the two bars gets the passage holding its
    rare word there, and nothing in vector or hybrid mode -- on a KB without probe statistics
    (ingested before them). With them, its best cosine lies below those of everyday unrelated
    questions, which cuts it in keyword mode too (test_relevance_calibration.py)."""
    question = "Is the electric kettle warranty still valid in the lobby?"
    host, harness = await office_kb(0.5, rerank=False, meaning={question: "electric kettle warranty period"})
    assert await answer(harness, question, search_mode="keyword") == []
    del host.storage[probe_stats_key(KB)]
    host.engine = Engine()
    harness = Harness(host)
    await answer(harness, ANSWERED, search_mode="keyword")  # the KB's state is loaded
    assert await answer(harness, question, search_mode="vector") == []
    assert await answer(harness, question, search_mode="hybrid") == []
    results = await answer(harness, question, search_mode="keyword")
    assert results and results[0].metadata["file_id"] == "onboarding.md"


async def test_keyword_mode_asks_the_vector_search_only_for_the_cut():
    host, harness = await office_kb(0.1, rerank=False)
    await answer(harness, ANSWERED, search_mode="keyword")  # the KB's state is loaded
    for cut, asked in (("auto", {"invoke_embedding": 1, "vector_search": 1}), ("off", {})):
        before = host.calls.copy()
        results = await answer(harness, ANSWERED, search_mode="keyword", relevance_cut=cut)
        assert results and results[0].metadata["file_id"] == ANSWER_FILE
        calls = {k: v for k, v in (host.calls - before).items() if not k.endswith("plugin_storage")}
        assert calls == asked


async def test_keyword_mode_judges_by_the_words_alone_when_the_embedding_model_fails():
    host, harness = await office_kb(0.1, rerank=False)
    host.fail("invoke_embedding")
    results = await answer(harness, ANSWERED, search_mode="keyword")
    assert results and results[0].metadata["file_id"] == ANSWER_FILE
    assert await answer(harness, UNANSWERED, search_mode="keyword") == []


@pytest.mark.parametrize("rerank", [False, True], ids=["no-rerank", "rerank"])
@pytest.mark.parametrize("mode", MODES)
async def test_the_operators_five_files_alone_answer_their_questions_and_not_the_kettle(mode, rerank):
    """Issue 40's knowledge base as the operator had it: the five files alone (fewer passages than
    the background needs, judged by the words), in every mode."""
    host = FakePlugin(embed=model_like(0.5))
    host.rerank_fn = overlap_rerank if rerank else None
    harness = Harness(host)
    for name, text in FILES.items():
        await harness.ingest(KB, name, text.encode(), document_id=name)
    settings = {"search_mode": mode, **({"rerank_model_uuid": "rr"} if rerank else {})}
    assert await answer(harness, UNANSWERED, **settings) == []
    for question, file_id in ((ANSWERED, ANSWER_FILE), ("Which level of the car park is closed?", "notice.txt"),
                              ("How many days of annual leave do I get?", "onboarding.md"),
                              ("Can I bring my dog to the office?", "faq.md"), ("What does decaf cost?", "prices.md")):
        results = await answer(harness, question, **settings)
        assert file_id in [r.metadata["file_id"] for r in results]


async def test_no_constant_score_would_do_for_both_models():
    """Why the cut is relative: with unrelated texts 0.8 apart (as multilingual-e5 puts them) the
    unanswered question's best passage scores higher than the answered question's best with
    unrelated texts 0.1 apart (all-MiniLM)."""
    best = {}
    for baseline in (0.1, 0.8):
        _, harness = await office_kb(baseline, rerank=False)
        for question in (UNANSWERED, ANSWERED):
            results = await answer(harness, question, search_mode="vector", relevance_cut="off")
            best[baseline, question] = results[0].score
    assert best[0.8, UNANSWERED] > best[0.1, ANSWERED]
    for baseline in (0.1, 0.8):
        _, harness = await office_kb(baseline, rerank=False)
        assert await answer(harness, UNANSWERED, search_mode="vector") == []
        assert await answer(harness, ANSWERED, search_mode="vector")


@pytest.mark.parametrize("mode, question", [
    ("vector", UNANSWERED), ("hybrid", UNANSWERED),
    ("vector", UNANSWERED_SHARING_WORDS), ("hybrid", UNANSWERED_SHARING_WORDS),
    ("keyword", UNANSWERED_SHARING_WORDS),  # (keyword search finds nothing for UNANSWERED either way)
])
async def test_off_gives_the_top_k_as_before(mode, question):
    _, harness = await office_kb(0.1, rerank=False)
    assert len(await answer(harness, question, search_mode=mode, relevance_cut="off")) >= 1
    assert await answer(harness, question, search_mode=mode) == []


@pytest.mark.parametrize("mode", MODES)
async def test_the_score_threshold_still_drops_weak_passages_of_an_answered_question(mode):
    _, harness = await office_kb(0.1, rerank=False)
    everything = await answer(harness, ANSWERED, search_mode=mode, top_k=10)
    assert len(everything) >= 2
    threshold = (everything[0].score + everything[-1].score) / 2
    kept = await answer(harness, ANSWERED, search_mode=mode, top_k=10, score_threshold=threshold)
    assert kept and len(kept) < len(everything)
    assert all(hit.score >= threshold for hit in kept)
    assert await answer(harness, UNANSWERED, search_mode=mode, score_threshold=threshold) == []


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
async def test_the_cut_costs_no_host_call_and_saves_the_rerank(mode):
    host, harness = await office_kb(0.1, rerank=True)
    settings = {"search_mode": mode, "rerank_model_uuid": "rr"}
    await answer(harness, ANSWERED, **settings)  # the KB's state is loaded
    for question, rerank_calls in ((ANSWERED, 1), (UNANSWERED, 0)):
        before = host.calls.copy()
        await answer(harness, question, **settings)
        calls = {k: v for k, v in (host.calls - before).items() if not k.endswith("plugin_storage")}
        assert calls == {"invoke_embedding": 1, "vector_search": 1, **({"invoke_rerank": 1} if rerank_calls else {})}


def test_the_stand_out_is_the_same_for_any_baseline():
    cosines = (0.62, 0.41, 0.38, 0.35, 0.33, 0.31, 0.30, 0.29, 0.28, 0.27)
    for baseline in (0.0, 0.3, 0.8):
        shifted = tuple(baseline + (1 - baseline) * c for c in cosines)
        assert Evidence(shifted, ()).stand_out == pytest.approx(Evidence(cosines, ()).stand_out)


def test_both_searches_ranking_one_passage_first_counts_for_it():
    """The same stand-out and coverage: answered when the vector and keyword lists rank the same
    passage first, not when each finds its own; and not when the keyword list's order is a tie of
    twenty passages that each hold one common word."""
    cosines = tuple(0.60 - 0.002 * i for i in range(DEPTH))  # stands out by 0.1: not enough alone
    vector_ids = tuple(f"v{i}" for i in range(DEPTH))
    clear = (4.0,) + (1.0,) * (DEPTH - 1)
    coverages = (0.2,) * DEPTH

    def evidence(keyword_ids: tuple[str, ...], strengths: tuple[float, ...]) -> Evidence:
        return Evidence(cosines, coverages, strengths, vector_ids, keyword_ids)
    agreeing = ("v0",) + tuple(f"k{i}" for i in range(1, DEPTH))
    assert evidence(agreeing, clear).agreement == 1.0
    assert judge(evidence(agreeing, clear)).answers
    assert not judge(evidence(tuple(f"k{i}" for i in range(DEPTH)), clear)).answers
    assert not judge(evidence(agreeing, (1.0,) * DEPTH)).answers  # a tie: the order says nothing
    assert evidence(("k0", "k1", "v3") + agreeing[3:], clear).agreement == pytest.approx(2 / (2 + 3 + 2))
    # a lead of a quarter over the DEPTH-th is a clear order: the agreement counts in full
    weak = Evidence(tuple(0.52 - 0.001 * i for i in range(DEPTH)), (0.05,) * DEPTH, (1.0,) * (DEPTH - 1) + (0.75,),
                    vector_ids, agreeing)
    assert weak.stand_out < 0.05 and judge(weak).answers


def test_a_kb_too_small_for_a_background_is_judged_by_its_words():
    few = (0.9, 0.2, 0.1)
    assert Evidence(few, ()).stand_out is None
    assert judge(Evidence(few, (0.9, 0.1), (3.0, 1.0))).answers
    assert not judge(Evidence(few, (), ())).answers  # none of its words occurs in the KB


def test_without_the_keyword_index_a_question_is_never_cut_for_the_lack_of_it():
    flat = tuple(0.5 - i * 0.001 for i in range(20))  # nothing stands out
    assert not judge(Evidence(flat, ())).answers  # no keyword matched: cut
    assert judge(Evidence(flat, None)).answers  # the index could not be asked (still being read)


def test_relevance_cut_setting():
    assert parse_retrieval_settings({}).relevance_cut == "auto"
    assert parse_retrieval_settings({"relevance_cut": "off"}).relevance_cut == "off"
    with pytest.raises(SettingsError, match="relevance_cut"):
        parse_retrieval_settings({"relevance_cut": "sometimes"})


async def test_vector_mode_at_the_smallest_pool_still_finds_a_background_beside_the_document_vectors():
    """Each file of two passages or more has a document vector too, which the vector search returns
    beside the passages: at top_k 5 (a pool of 20) the search must still bring DEPTH passages."""
    host, harness = await office_kb(0.1, rerank=False)
    asked: list[int] = []
    search = host.vector_search

    async def recording_search(collection_id, query_vector, top_k=5, **kwargs):
        asked.append(top_k)
        return await search(collection_id, query_vector, top_k=top_k, **kwargs)
    host.vector_search = recording_search
    assert await answer(harness, UNANSWERED, search_mode="vector", top_k=5) == []
    assert asked and asked[-1] >= 2 * DEPTH
