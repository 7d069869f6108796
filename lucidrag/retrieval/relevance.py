"""Whether the knowledge base answers a question at all: the relevance cut (setting `relevance_cut`).

A question no passage answers still has a best passage, and its score alone does not say so: how
similar unrelated texts look depends on the embedding model (all-MiniLM puts them ~0.1 apart,
multilingual-e5 ~0.8), and a constant cut on the fused score that empties most unrelated questions
also empties real ones (docs/BENCHMARKS.md). So the cut weighs evidence measured against the
knowledge base itself, from the candidates the searches have found:

* how far the best passage stands out from the rest of this knowledge base for this question
  (`stand_out`): (best cosine − the DEPTH-th best) / (1 − the DEPTH-th best). The DEPTH-th best
  passage almost never answers the question, so it shows how close this KB's unrelated passages
  come to the question with this model; dividing by the room left above it makes the measure the
  same for a model that puts unrelated texts 0.1 apart and one that puts them 0.8 apart (it is
  unchanged when every cosine c becomes b + (1 − b)·c);
* how much of the question's distinctive wording one passage holds (`coverage`): the share of the
  question's idf weight found in the best keyword candidate (a term no passage holds has the
  largest idf), i.e. whether the words that make the question specific occur in this KB at all;
* whether the two searches agree on a passage (`agreement`): 2 / (2 + its rank in the vector list
  + its rank in the keyword list), ranks from 0, for the passage both lists rank best (1: both put
  it first; 0: no passage in both lists' first DEPTH). The meaning and the words of a question
  this KB answers point at the same passage; for an unrelated question each search finds its own
  nearest noise. It counts in full when the keyword list has an order (its best leads the DEPTH-th
  by CLEAR_LEAD of the BM25 stand-out below or more), less in a near-tie: twenty passages that each
  hold one common word of the question tie, and which of them comes first says nothing;
* how far the best BM25 match stands out from the DEPTH-th best (`keyword_stand_out`; the DEPTH-th
  counts as 0 when fewer chunks hold any of the question's terms);
* with the KB's probe statistics (state/probestats.py), how far the best cosine lies above the
  cosine this model gives everyday questions no passage of this KB answers (`background`: the
  median, over the probes of the question's language, of each probe's best cosine over every
  chunk ingested): (best cosine − background) / (1 − background), at most NULL_CAP;
* and with the KB's anchor (state/openingstats.py: the median best cosine of its first files'
  opening sentences over the other files' chunks, i.e. how close a question on this KB's subject
  comes to passages that do not answer it), where the best cosine lies on the scale from the
  background (0) to the anchor (1): (best cosine − background) / (anchor − background), within
  ±ANCHOR_CLIP. Between two KBs whose unrelated questions lie equally far, the one whose own
  passages lie close together asks more of a question's best passage.

A question is answered when stand_out + coverage + AGREEMENT_WEIGHT × agreement × min(1,
keyword_stand_out / CLEAR_LEAD) reaches ANSWER_BAR (keyword mode, which asks the vector search for
this evidence too: KEYWORD_MODE_BAR); with a background, when that plus NULL_WEIGHT × the
measure above reaches CALIBRATED_ANSWER_BAR; with an anchor too, when that plus
ANCHORED_NULL_WEIGHT × the measure above the background and ANCHOR_WEIGHT × the anchor's reaches
ANCHORED_ANSWER_BAR. In keyword mode a background only takes away (a best
cosine below it, KEYWORD_MODE_NULL_WEIGHT × the measure) and the bar stays: there the words decide,
and a question sharing one common word with many passages lies above a background of unrelated
questions without being answered. Without a stand-out (fewer than DEPTH passages to compare,
e.g. a small KB whose passages may all answer; keyword mode when the vector search fails) it is
answered when coverage + half the BM25 stand-out reaches KEYWORD_BAR. Else it gets no passages
(docs/BENCHMARKS.md, "Questions the knowledge base cannot answer"). Where the keyword index cannot
be asked (it is still being read after a restart) the question is not cut for the lack of its
evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lucidrag.retrieval.fusion import Candidate

# Candidates of each list the evidence looks at: the shortest list any mode searches, so the
# verdict is the same whatever top_k (and the same in vector and hybrid mode).
DEPTH = 20
# The highest bars (0.01 steps) at which the cut costs no measured collection's own questions more
# than 0.005 nDCG@10 or Recall@5, with MiniLM or multilingual-e5 (bench_relevance.py --replay
# --cap 0.005): ANSWER_BAR in vector and hybrid mode, with or without a rerank model (one step
# higher empties long CISI queries answered there with multilingual-e5), KEYWORD_MODE_BAR in
# keyword mode, whose BM25 ranking alone answers a few questions that the vector search finds
# nothing for (a MedQuAD question matched by one rare word). The questions a KB answers come
# first, at the price of most unrelated questions still getting passages.
ANSWER_BAR = 0.30
KEYWORD_MODE_BAR = 0.27
AGREEMENT_WEIGHT = 0.5
CLEAR_LEAD = 0.25
# Keyword evidence alone (measured in keyword mode before it asked the vector search: the highest
# bar costing no collection's own questions more than 0.005).
KEYWORD_BAR = 0.29
KEYWORD_STAND_OUT_WEIGHT = 0.5
# With a KB's probe background: the bars chosen the same way (0.005 cap, both models), which also
# hold with each collection's bars chosen from the other collections alone (docs/BENCHMARKS.md).
# A larger weight empties more unrelated questions on the collections tuned on but costs a
# held-out Chinese collection 0.010 nDCG@10.
NULL_WEIGHT = 0.25
NULL_CAP = 0.5
CALIBRATED_ANSWER_BAR = 0.37
KEYWORD_MODE_NULL_WEIGHT = 0.5
# With the KB's anchor as well (vector and hybrid mode; keyword mode keeps its rule): the weights
# chosen on a replay of the measured collections before the anchor was built, each collection's
# bar also from the other collections alone (docs/BENCHMARKS.md); the bar as above. A larger weight
# of either measure, or a wider clip, costs a held-out DRCD 0.010 (a question MiniLM puts below the
# background that the keyword search answers); a smaller one empties fewer (both 0.1: 49 % instead
# of 51 %) and leaves a held-out CISI's cost at 0.025.
ANCHOR_WEIGHT = 0.1
ANCHOR_CLIP = 1.0
ANCHORED_NULL_WEIGHT = 0.15
ANCHORED_ANSWER_BAR = 0.42


@dataclass(frozen=True)
class Evidence:
    cosines: tuple[float, ...]  # the vector candidates' cosines, best first, at most DEPTH (empty: no vector search)
    coverages: tuple[float, ...] | None  # keyword candidates' query coverage, BM25 order (None: not searched)
    strengths: tuple[float, ...] = ()  # their BM25 scores, best first
    vector_ids: tuple[str, ...] = ()  # the chunks of `cosines`, in their order
    keyword_ids: tuple[str, ...] = ()  # the chunks of `coverages`, in their order

    @property
    def stand_out(self) -> float | None:
        """How far the best cosine stands out from the DEPTH-th best, on the room above that."""
        if len(self.cosines) < DEPTH:  # a KB (or a filter's choice) of a few passages: they may all answer
            return None
        background = self.cosines[-1]
        room = 1.0 - background
        return (self.cosines[0] - background) / room if room > 1e-9 else 0.0

    @property
    def coverage(self) -> float | None:
        if self.coverages is None:
            return None
        return max(self.coverages, default=0.0)

    @property
    def agreement(self) -> float:
        """2 / (2 + vector rank + keyword rank) of the passage both lists rank best (0: none in both)."""
        keyword_rank = {chunk_id: rank for rank, chunk_id in enumerate(self.keyword_ids)}
        return max((2.0 / (2 + rank + keyword_rank[chunk_id]) for rank, chunk_id in enumerate(self.vector_ids)
                    if chunk_id in keyword_rank), default=0.0)

    @property
    def keyword_stand_out(self) -> float:
        """How far the best BM25 score stands out from the DEPTH-th best (which counts as 0 when
        fewer than DEPTH chunks hold any of the question's terms)."""
        if not self.strengths or self.strengths[0] <= 0.0:
            return 0.0
        background = self.strengths[DEPTH - 1] if len(self.strengths) >= DEPTH else 0.0
        return (self.strengths[0] - background) / self.strengths[0]


@dataclass(frozen=True)
class Verdict:
    answers: bool
    stand_out: float | None
    coverage: float | None


def gather(vector: Sequence[Candidate], keyword: Sequence[Candidate] | None) -> Evidence:
    """The evidence of one question's candidate lists (`vector` in any order; `keyword` in BM25
    order, None when the keyword index was not searched)."""
    best = sorted(vector, key=lambda c: c.score, reverse=True)[:DEPTH]
    cosines, vector_ids = tuple(c.score for c in best), tuple(c.chunk_id for c in best)
    if keyword is None:
        return Evidence(cosines, None, vector_ids=vector_ids)
    head = keyword[:DEPTH]
    return Evidence(cosines, tuple(c.score for c in head), tuple(c.rank_strength for c in head), vector_ids,
                    tuple(c.chunk_id for c in head))


def bar(keyword_mode: bool, calibrated: bool, anchored: bool = False) -> float:
    """The bar of a mode, with a probe background (and an anchor) or without."""
    if keyword_mode:
        return KEYWORD_MODE_BAR
    if anchored:
        return ANCHORED_ANSWER_BAR
    return CALIBRATED_ANSWER_BAR if calibrated else ANSWER_BAR


def above_background(evidence: Evidence, background: float) -> float:
    """How far the best cosine lies above the KB's probe background, on the room above it (at
    most NULL_CAP; negative below it)."""
    room = 1.0 - background
    if not evidence.cosines or room <= 1e-9:
        return 0.0
    return min(NULL_CAP, (evidence.cosines[0] - background) / room)


def toward_anchor(evidence: Evidence, background: float, anchor: float) -> float:
    """Where the best cosine lies from the probe background (0) to the KB's anchor (1), within
    ±ANCHOR_CLIP (`anchor` > `background`)."""
    if not evidence.cosines:
        return 0.0
    return max(-ANCHOR_CLIP, min(ANCHOR_CLIP, (evidence.cosines[0] - background) / (anchor - background)))


def judge(evidence: Evidence, keyword_mode: bool = False, background: float | None = None,
          answer_bar: float | None = None, anchor: float | None = None) -> Verdict:
    """The verdict in keyword mode or the others, with the KB's probe `background` and `anchor`
    when it has them (an anchor counts only with a background below it), at `answer_bar` (None:
    `bar`'s)."""
    stand_out, coverage = evidence.stand_out, evidence.coverage
    if coverage is None:  # the keyword index could not be asked (still being read after a restart)
        answers = True
    elif stand_out is None:  # keyword mode, or too few passages to compare
        answers = coverage + KEYWORD_STAND_OUT_WEIGHT * evidence.keyword_stand_out >= KEYWORD_BAR
    else:
        agreement = evidence.agreement * min(1.0, evidence.keyword_stand_out / CLEAR_LEAD)
        score = stand_out + coverage + AGREEMENT_WEIGHT * agreement
        anchored = background is not None and anchor is not None and anchor > background and not keyword_mode
        if anchored:
            score += (ANCHORED_NULL_WEIGHT * above_background(evidence, background)
                      + ANCHOR_WEIGHT * toward_anchor(evidence, background, anchor))
        elif background is not None:
            above = above_background(evidence, background)
            score += KEYWORD_MODE_NULL_WEIGHT * min(0.0, above) if keyword_mode else NULL_WEIGHT * above
        answers = score >= (bar(keyword_mode, background is not None, anchored) if answer_bar is None
                            else answer_bar)
    return Verdict(answers, stand_out, coverage)
