"""A title shared by every chunk must not outweigh the body match (BM25F-style heading
field), and equal fused scores are broken by the body match."""

from __future__ import annotations

import random

import pytest

from tests.conftest import Harness

KB = "kb-fields"

ZEPHYR = """# Zephyr-9 Espresso Machine Manual

## Installation

Unpack the Zephyr-9 and place it on a flat, dry surface away from the sink. Connect the power cord
to a grounded outlet. Fill the water tank up to the MAX mark. The first heating takes about two
minutes; the cycle ends when the ready light stops blinking.

## Descaling

Limescale builds up in the boiler. Fill the tank with one litre of water and a sachet of descaler,
put a large bowl under the group head and hold the steam button for five seconds. The descaling
program then runs by itself; the whole cycle takes about 25 minutes and ends with three beeps.

## Warranty

The Zephyr-9 is covered for two years from the date of purchase. Damage caused by limescale is
not covered when the machine was not descaled as described in this manual. Keep the receipt.

## Cleaning

Rinse the drip tray and the portafilter after each brewing cycle. Wipe the steam wand with a damp
cloth right after use. Never put parts of the Zephyr-9 in the dishwasher.
"""

OTHERS = {
    "grinder.md": """# Aurora-3 Coffee Grinder Manual

## Grinding

Turn the dial to choose the grind size. Fine grounds suit espresso; coarse grounds suit a French
press. One grinding cycle takes ten to fifteen seconds.

## Cleaning

Empty the hopper and brush the burrs once a month. Do not use water on the burrs.
""",
    "kettle.md": """# Boreal Kettle Manual

## Descaling

Boil a mixture of water and vinegar, let it stand for an hour and rinse twice. Descale the kettle
every month in hard-water areas.

## Safety

Never immerse the base in water. Unplug the kettle before cleaning.
""",
}

QUERY = "How long does the descaling cycle of the Zephyr-9 take?"


async def _ingest_manuals(harness: Harness) -> None:
    await harness.ingest(KB, "zephyr-9.md", ZEPHYR.encode())
    for name, text in OTHERS.items():
        await harness.ingest(KB, name, text.encode())


async def _headings(harness: Harness, mode: str) -> list[str]:
    response = await harness.retrieve(KB, QUERY, settings={"search_mode": mode, "top_k": 3})
    return [entry.metadata["heading"] for entry in response.results]


async def test_the_section_that_answers_comes_first_although_every_chunk_shares_the_title(harness: Harness):
    await _ingest_manuals(harness)
    for mode in ("keyword", "hybrid"):
        headings = await _headings(harness, mode)
        assert headings[0] == "Zephyr-9 Espresso Machine Manual › Descaling", (mode, headings)


async def test_naming_the_product_does_not_push_the_answer_down(harness: Harness):
    await _ingest_manuals(harness)
    without = await harness.retrieve(KB, "How long does the descaling cycle take?",
                                     settings={"search_mode": "keyword", "top_k": 3})
    assert without.results[0].metadata["heading"] == "Zephyr-9 Espresso Machine Manual › Descaling"
    assert (await _headings(harness, "keyword"))[0] == without.results[0].metadata["heading"]


def test_equal_fused_rank_goes_to_the_better_body_match():
    from lucidrag.retrieval.fusion import Candidate, fuse, single

    title_only = Candidate("title-only", 0.6, strength=2.0, body=0.0)
    answers = Candidate("answers", 0.6, strength=2.0, body=0.5)
    vector = [Candidate("title-only", 0.7), Candidate("answers", 0.7)]
    assert [f.chunk_id for f in fuse(vector, [title_only, answers], 0.5)][0] == "answers"
    assert [f.chunk_id for f in single([title_only, answers], from_vector=False)][0] == "answers"


def test_a_title_term_in_every_chunk_counts_less_than_the_body_but_still_tells_files_apart():
    from tests.reference_bm25 import BM25Index

    index = BM25Index()
    title = "Zephyr-9 Manual"
    index.add("zephyr", [(f"z{i}", f"{title}\n{body}", title) for i, body in enumerate(
        ["Unpack and place on a flat surface.", "Descaling takes 25 minutes.", "Two years warranty."])])
    index.add("kettle", [("k0", "Kettle Manual\nDescaling with vinegar takes an hour.", "Kettle Manual")])
    assert index.search("zephyr-9 descaling", 4)[0][0] == "z1"  # title and body beat body alone
    ranked = [cid for cid, _ in index.search("zephyr-9 warranty", 4)]
    assert ranked[0] == "z2" and "k0" not in ranked


def test_a_flat_keyword_list_counts_less_than_a_vector_list_whose_best_stand_out():
    from lucidrag.retrieval.fusion import Candidate, fuse

    # keyword: "x" barely ahead of nine near-equal matches; vector: "y" and "x" far above the rest
    keyword = [Candidate("x", 0.90), Candidate("y", 0.89)] + [Candidate(f"k{i}", 0.89) for i in range(8)]
    keyword.append(Candidate("far", 0.80))
    vector = [Candidate("y", 0.9), Candidate("x", 0.85)] + [Candidate(f"v{i}", 0.1) for i in range(8)]
    assert fuse(vector, keyword, 0.5)[0].chunk_id == "y"


async def test_hybrid_top_k_shows_one_passage_per_file_before_second_passages(harness: Harness):
    steps = "\n\n".join(f"## Step {i}\n\nDescale the boiler: step {i} of the descaling routine, "
                        f"with citric acid and warm water, repeated {i} times." for i in range(4))
    await harness.ingest(KB, "descaling.md", f"# Descaling guide\n\n{steps}".encode())
    await harness.ingest(KB, "kettle.txt", b"Descale the kettle with citric acid once a month.")
    response = await harness.retrieve(KB, "descale the boiler with citric acid",
                                      settings={"search_mode": "hybrid", "top_k": 2})
    files = [entry.metadata["file_id"] for entry in response.results]
    assert len(set(files)) == 2, [entry.metadata["heading"] for entry in response.results]


SENTENCES = {
    "answer": "The Blue House on Stone Nullah Lane in Wan Chai was built in 1922 and served as a hospital "
              "before it became a martial arts school.",
    "repeats": "Wan Chai, Wan Chai: the Wan Chai Gap.",
    "hospital": "The hospital served the district for fifty years.",
    "harbour": "A new hospital was built near the harbour and served sailors.",
    "school": "The school was built on the hill and served the village.",
    "market": "The market served farmers from the valley.",
}


async def test_hybrid_prefers_the_sentence_holding_more_of_the_question_over_one_repeating_a_name(
        harness: Harness):
    # BM25 alone ranks the short sentence that repeats the rare name first (keyword mode keeps
    # that order); in hybrid, the keyword half counts how much of the question a chunk holds,
    # so it no longer overrules the vector half, which has the answer first.
    for name, text in SENTENCES.items():
        await harness.ingest(KB, f"{name}.txt", text.encode(), document_id=name)
    query = "Which building in Wan Chai served as a hospital?"
    keyword = await harness.retrieve(KB, query, settings={"search_mode": "keyword", "top_k": 3})
    assert keyword.results[0].metadata["file_id"] == "repeats"
    hybrid = await harness.retrieve(KB, query, settings={"search_mode": "hybrid", "top_k": 3})
    assert hybrid.results[0].metadata["file_id"] == "answer", [e.metadata["file_id"] for e in hybrid.results]


ABSTRACT = """Zinc and childhood pneumonia

Zinc supplementation was given daily to 600 infants in a randomised, placebo-controlled trial
run in three district hospitals over two winters. The dose was ten milligrams of zinc sulphate
in syrup; compliance was checked by weekly home visits and by counting the returned bottles.
Field workers recorded every visit, the weight of each infant and any side effect reported by
the mothers, and the trial's data board met every quarter to review the accumulated safety data.

Episodes of pneumonia in children of the treated group fell by a third compared with placebo.
Hospital admissions for lower respiratory infection fell as well, while diarrhoea rates did not
change. The effect was largest in underweight infants and in the second winter of the trial,
which suggests that a longer course of the syrup could prevent more of these severe illnesses.
"""


def test_a_files_second_passage_stays_ahead_only_when_it_clearly_beats_other_files():
    from lucidrag.retrieval.fusion import DIVERSITY_MARGIN, Fused, diversify

    def ranked(second: float, other: float) -> list[str]:
        hits = [Fused("a1", 1.0, None, None, 1.0), Fused("a2", second, None, None, second),
                Fused("b1", other, None, None, other), Fused("c1", 0.0, None, None, 0.0)]
        hits.sort(key=lambda f: f.rank_value, reverse=True)
        return [f.chunk_id for f in diversify(hits, {"a1": "a", "a2": "a", "b1": "b", "c1": "c"})]

    # the manual's second relevant section far above every other file's best: it keeps its place
    assert ranked(0.3 + DIVERSITY_MARGIN + 0.05, 0.3) == ["a1", "a2", "b1", "c1"]
    # about as good as another file's best: that file's passage is shown first
    assert ranked(0.6 + DIVERSITY_MARGIN / 2, 0.6) == ["a1", "b1", "a2", "c1"]


async def test_asking_for_fewer_results_does_not_change_which_come_first(harness: Harness):
    # Sixty service notes with overlapping words: both lists hold far more candidates than the
    # user asks for. Each list must bring the same candidates to the fusion whatever top_k is;
    # with top_k x 4 candidates (20 at top_k 3) a passage lost the other list's evidence when it
    # ranked 21st or lower there, and top_k 3 put other passages first than top_k 25 did.
    rng = random.Random(6)
    words = ("pump valve pressure seal boiler filter gasket motor sensor relay fuse cable drain tank "
             "nozzle heater timer switch spring bearing").split()
    for i in range(60):
        note = " ".join(rng.sample(words, rng.randint(3, 9)))
        await harness.ingest(KB, f"note-{i}.txt", f"{note}.".encode())
    for _ in range(5):
        query = " ".join(rng.sample(words, 3))
        few = await harness.retrieve(KB, query, settings={"search_mode": "hybrid", "top_k": 3})
        many = await harness.retrieve(KB, query, settings={"search_mode": "hybrid", "top_k": 25})
        first = [entry.metadata["file_id"] for entry in few.results]
        assert len(first) == 3
        assert first == [entry.metadata["file_id"] for entry in many.results][:3], query


@pytest.mark.parametrize("mode", ["vector", "keyword"])
async def test_every_mode_shows_other_files_before_a_files_near_copy_passage(harness: Harness, mode: str):
    # A manual repeats its answer in two sections; a second file answers about as well. With
    # top_k 2 the operator should see both sources, not the manual twice.
    manual = ("# Pump manual\n\n## Seal\n\nReplace the pump seal every year.\n\n"
              "## Maintenance plan\n\nEvery year: replace the pump seal.\n")
    await harness.ingest(KB, "manual.md", manual.encode())
    await harness.ingest(KB, "service-note.txt", b"Service note: we replace the pump seal yearly, as the plan says.")
    for i in range(6):
        await harness.ingest(KB, f"menu-{i}.txt", f"Canteen menu {i}: soup, bread and apples.".encode())
    response = await harness.retrieve(KB, "replace the pump seal", settings={"search_mode": mode, "top_k": 2})
    texts = [entry.content[0].text for entry in response.results]
    assert len({entry.metadata["file_id"] for entry in response.results}) == 2, texts
