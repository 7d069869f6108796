"""Questions the knowledge base cannot answer: how many get nothing, and what the cut costs.

    .venv-bench/bin/python bench/bench_relevance.py [--kbs scifact,medquad,drcd,cmrc]
        [--models minilm,e5] [--queries 100] [--docs 400] [--foreign 100] [--modes vector,keyword,hybrid]
        [--rerank] [--dump FILE] [--patch MODULE.ATTR=VALUE ...]
    .venv-bench/bin/python bench/bench_relevance.py --latency 20000
    python bench/bench_relevance.py --replay DUMP[,DUMP ...] [--bars ANSWER,KEYWORD_MODE | --cap 0.005]

For every model and every KB collection: a subset of the collection (bench_retrieval.subsample:
its real questions' judged documents plus seeded others) is uploaded through the real component
against the benchmark host (bench_retrieval.BenchHost). Then, in every mode (and with `--rerank`,
hybrid with a stand-in rerank model: the cosine of the same embedding model, as no cross-encoder
ships offline), it asks

* the collection's own questions, with the relevance cut off and on (`relevance_cut`): nDCG@10 and
  Recall@5 (top_k 10, document level) of both, and how many of them got nothing;
* questions of the other collections ("foreign": SciFact claims against MedQuAD's FAQ entries,
  DRCD's questions against CMRC's sentences, ...), with the cut on: the share answered with
  nothing.

`--dump FILE` writes, per question, the candidate lists the relevance cut saw and each mode's
uncut ranking; `--replay` judges them again at other bars (or finds, with `--cap`, the highest
that cost no row's own questions more than that), without a model. `--latency N` measures the
engine time per question with the cut off and on, on N synthetic chunks (hash embedder).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_retrieval import (  # noqa: E402
    CHUNKINGS,
    Bench,
    BenchHost,
    apply_patches,
    code_version,
    metrics,
    subsample,
)
from tests.fakes import hash_embed  # noqa: E402

TOP_K = 10
LANGUAGE_GROUP = {"scifact": "en", "cisi": "en", "medquad": "en", "medquad-pages": "en", "drcd": "zh", "cmrc": "zh"}
# Where a collection's questions are asked as foreign questions: every other collection of the
# same language (the hard case: same script, often the same field) and, with --cross-language,
# the others too.
QUESTION_SOURCES = ("scifact", "cisi", "medquad", "drcd", "cmrc")


@dataclass
class Row:
    model: str
    kb: str
    mode: str
    real_off_ndcg: float = 0.0
    real_on_ndcg: float = 0.0
    real_off_recall: float = 0.0
    real_on_recall: float = 0.0
    real_queries: int = 0
    real_emptied: int = 0  # real questions the cut left with nothing
    foreign: dict[str, tuple[int, int]] = field(default_factory=dict)  # source → (emptied, asked)


def foreign_questions(kb: str, n: int, seed: int, cross_language: bool) -> dict[str, dict[str, str]]:
    """source collection → {qid: question}, `n` seeded questions of each other collection."""
    from bench.lib.datasets import available_datasets, load_dataset

    out: dict[str, dict[str, str]] = {}
    for source in QUESTION_SOURCES:
        if source == kb or source not in available_datasets():
            continue
        if not cross_language and LANGUAGE_GROUP[source] != LANGUAGE_GROUP[kb]:
            continue
        ds = load_dataset(source)
        qids = sorted(q for q in ds.queries if ds.qrels.get(q))
        random.Random(seed).shuffle(qids)
        out[source] = {q: ds.queries[q] for q in qids[:n]}
    return out


class Recorder:
    """With --dump: the candidate lists the relevance cut saw for the current question (whole, not
    only the part `relevance.gather` keeps), and every question answered (no cut)."""

    def __init__(self) -> None:
        self.current: dict[str, Any] | None = None

    def install(self) -> None:
        from lucidrag.retrieval import relevance

        gather, judge = relevance.gather, relevance.judge

        def recording_gather(vector, keyword):
            if self.current is not None:
                self.current["evidence"] = {
                    "cosines": sorted((c.score for c in vector), reverse=True),
                    "coverages": None if keyword is None else [c.score for c in keyword],
                    "strengths": None if keyword is None else [c.rank_strength for c in keyword],
                    "vector_ids": [c.chunk_id for c in sorted(vector, key=lambda c: -c.score)],
                    "keyword_ids": None if keyword is None else [c.chunk_id for c in keyword],
                }
            return gather(vector, keyword)

        def answering_judge(evidence, keyword_mode=False, background=None, answer_bar=None, anchor=None):
            if self.current is not None:
                self.current["background"] = background
                self.current["anchor"] = anchor
            verdict = judge(evidence, keyword_mode, background, answer_bar, anchor)
            return relevance.Verdict(True, verdict.stand_out, verdict.coverage)
        relevance.gather = recording_gather
        relevance.judge = answering_judge


@dataclass
class Collection:
    """One KB's documents with its own judged questions, and the other collections' questions."""

    model: str
    kb: str
    corpus: dict[str, tuple[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    foreign: dict[str, dict[str, str]]  # source collection → {qid: question}
    file_ext: str = ".txt"


def load(model: str, kb: str, args) -> Collection:
    from bench.lib.datasets import DATASETS, load_dataset

    corpus, queries, qrels = subsample(load_dataset(kb), args.queries, args.docs, args.seed)
    return Collection(model, kb, corpus, queries, qrels, foreign_questions(kb, args.foreign, args.seed,
                                                                           args.cross_language),
                      DATASETS[kb].file_ext)


async def measure(c: Collection, doc_embed, query_embed, modes: Sequence[str], rerank: bool,
                  recorder: Recorder | None = None, dump=None) -> list[Row]:
    """Upload `c.corpus` through the real component and ask every question in every mode (with
    `rerank`, hybrid with a stand-in rerank model: the query-document cosine of `doc_embed` and
    `query_embed`); with `dump`, write the evidence per question instead (Recorder)."""
    creation = CHUNKINGS["lucid"]
    host = BenchHost(doc_embed, query_embed)

    def rerank_fn(query: str, documents: list[str]) -> list[float]:
        from lucidrag.vectors.scoring import cosine

        q = query_embed([query])[0]
        return [max(0.0, cosine(q, d)) for d in doc_embed(documents)]
    host.rerank_fn = rerank_fn
    bench = Bench(host)
    await bench.ingest("lucid", c.corpus, creation, file_ext=c.file_ext)
    await bench.warm("lucid", creation)

    async def ask(question: str, settings: dict[str, Any], record: dict[str, Any] | None) -> list[str]:
        if recorder is not None:
            recorder.current = record
        try:
            response = await bench.retrieve("lucid", question, {"top_k": TOP_K, **settings}, creation)
        finally:
            if recorder is not None:
                recorder.current = None
        if response.metadata and response.metadata.get("error"):
            raise RuntimeError(f"retrieve failed: {response.metadata['error']}")
        return list(dict.fromkeys(bench.file_to_doc.get(str(e.metadata.get("file_id")), "?")
                                  for e in response.results))

    if dump is not None and recorder is not None:
        await dump_evidence(c.model, c.kb, c.queries, c.qrels, c.foreign, ask, recorder, dump)
        return []
    rows = []
    variants = [(mode, {"search_mode": mode}) for mode in modes]
    if rerank:
        variants.append(("hybrid+rerank", {"search_mode": "hybrid", "rerank_model_uuid": "bench-rerank"}))
    for mode, settings in variants:
        row = Row(c.model, c.kb, mode, real_queries=len(c.queries))
        for qid, question in c.queries.items():
            off = await ask(question, {**settings, "relevance_cut": "off"}, None)
            on = await ask(question, {**settings, "relevance_cut": "auto"}, None)
            n_off, r_off, _ = metrics(off, c.qrels.get(qid, {}))
            n_on, r_on, _ = metrics(on, c.qrels.get(qid, {}))
            row.real_off_ndcg += n_off
            row.real_on_ndcg += n_on
            row.real_off_recall += r_off
            row.real_on_recall += r_on
            row.real_emptied += not on
        n = max(1, len(c.queries))
        row.real_off_ndcg, row.real_on_ndcg = row.real_off_ndcg / n, row.real_on_ndcg / n
        row.real_off_recall, row.real_on_recall = row.real_off_recall / n, row.real_on_recall / n
        for source, questions in c.foreign.items():
            emptied = 0
            for question in questions.values():
                emptied += not await ask(question, {**settings, "relevance_cut": "auto"}, None)
            row.foreign[source] = (emptied, len(questions))
        rows.append(row)
        print(f"  {c.kb} / {c.model} / {mode}: " + row_text(row), file=sys.stderr, flush=True)
    return rows


async def run_kb(model: str, kb: str, args, embedder, recorder: Recorder, dump) -> list[Row]:
    c = load(model, kb, args)
    every_query = list(c.queries.values()) + [q for qs in c.foreign.values() for q in qs.values()]
    query_vectors = dict(zip(every_query, embedder.embed_queries(every_query)))

    def query_embed(texts: list[str]) -> list[list[float]]:
        missing = [t for t in texts if t not in query_vectors]
        if missing:
            query_vectors.update(zip(missing, embedder.embed_queries(missing)))
        return [query_vectors[t] for t in texts]

    # a dry run with the hash embedder finds every text the engine will embed: one big batch
    dry = BenchHost(lambda ts: [hash_embed(t) for t in ts])
    dry.recorded = []
    await Bench(dry).ingest("lucid", c.corpus, CHUNKINGS["lucid"], file_ext=c.file_ext)
    t0 = time.perf_counter()
    embedder.embed_documents(list(dict.fromkeys(dry.recorded)))
    print(f"  {kb} / {model}: {len(c.corpus)} docs embedded in {time.perf_counter() - t0:.0f} s", file=sys.stderr,
          flush=True)
    return await measure(c, embedder.embed_documents, query_embed, args.modes.split(","), args.rerank,
                         recorder, dump)


DUMPED_MODES = (("vector", {"search_mode": "vector"}), ("keyword", {"search_mode": "keyword"}),
                ("hybrid", {"search_mode": "hybrid"}),
                ("hybrid+rerank", {"search_mode": "hybrid", "rerank_model_uuid": "bench-rerank"}))


async def dump_evidence(model: str, kb: str, queries, qrels, foreign, ask, recorder: Recorder, dump) -> None:
    """Per question: what the hybrid search saw (both lists) and each mode's ranking without a cut;
    the vector and keyword modes' own evidence is a prefix of the hybrid lists, and a rerank model
    reorders after the cut (the same verdict as hybrid)."""
    asked = [(kb, qid, q) for qid, q in queries.items()]
    asked += [(source, qid, q) for source, qs in foreign.items() for qid, q in qs.items()]
    for source, qid, question in asked:
        record: dict[str, Any] = {"model": model, "kb": kb, "source": source, "qid": qid}
        for mode, settings in DUMPED_MODES:
            ranked = await ask(question, {**settings, "relevance_cut": "auto"}, record if mode == "hybrid" else None)
            n, r, _ = metrics(ranked, qrels.get(qid, {}) if source == kb else {})
            record[mode] = {"ndcg": n, "recall": r}
        dump.write(json.dumps(record, ensure_ascii=False) + "\n")
    dump.flush()
    print(f"  {kb} / {model}: {len(asked)} questions dumped", file=sys.stderr, flush=True)


def read_dumps(paths: Sequence[str], anchors: bool = True) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(model, KB) → its dumped questions; a later file's dump of a (model, KB) replaces an earlier
    one. Without `anchors`: as if no KB had one (the cut before them)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for path in paths:
        mine: dict[tuple[str, str], list[dict[str, Any]]] = {}
        with open(path, encoding="utf-8") as f:
            for line in f:
                record = json.loads(line)
                if not anchors:
                    record.pop("anchor", None)
                mine.setdefault((record["model"], record["kb"]), []).append(record)
        groups.update(mine)
    return groups


def replay(groups: dict[tuple[str, str], list[dict[str, Any]]], answer_bar: float,
           keyword_mode_bar: float) -> list[Row]:
    """The rows `measure` would give at these bars (ANSWER_BAR, KEYWORD_MODE_BAR), from dumped
    evidence: every question judged again by relevance.judge (keyword mode asks the vector search
    too: the same evidence, its own bar), an emptied own question losing its uncut nDCG@10 and
    Recall@5."""
    from lucidrag.retrieval import relevance

    rows = []
    for (model, kb), records in sorted(groups.items()):
        by_mode: dict[str, Row] = {}
        for record in records:
            e, head = record["evidence"], relevance.DEPTH
            keyword = None if e["coverages"] is None else (tuple(e["coverages"][:head]), tuple(e["strengths"][:head]))
            evidence = relevance.Evidence(tuple(e["cosines"][:head]), *(keyword or (None, ())),
                                          tuple(e["vector_ids"][:head]), tuple((e["keyword_ids"] or [])[:head]))
            background, anchor = record.get("background"), record.get("anchor")
            verdicts = {keyword_mode: relevance.judge(evidence, keyword_mode, background, bar, anchor).answers
                        for keyword_mode, bar in ((False, answer_bar), (True, keyword_mode_bar))}
            for mode, _ in DUMPED_MODES:
                answers = verdicts[mode == "keyword"]
                row = by_mode.setdefault(mode, Row(model, kb, mode))
                if record["source"] == kb:
                    row.real_queries += 1
                    row.real_off_ndcg += record[mode]["ndcg"]
                    row.real_off_recall += record[mode]["recall"]
                    row.real_on_ndcg += record[mode]["ndcg"] if answers else 0.0
                    row.real_on_recall += record[mode]["recall"] if answers else 0.0
                    row.real_emptied += not answers
                else:
                    emptied, asked = row.foreign.get(record["source"], (0, 0))
                    row.foreign[record["source"]] = (emptied + (not answers), asked + 1)
        for row in by_mode.values():
            n = max(1, row.real_queries)
            row.real_off_ndcg, row.real_on_ndcg = row.real_off_ndcg / n, row.real_on_ndcg / n
            row.real_off_recall, row.real_on_recall = row.real_off_recall / n, row.real_on_recall / n
            rows.append(row)
    return rows


def cost(row: Row) -> float:
    """What the cut costs the row's own questions: the larger loss of nDCG@10 and Recall@5."""
    return max(row.real_off_ndcg - row.real_on_ndcg, row.real_off_recall - row.real_on_recall)


def foreign_share(rows: Sequence[Row]) -> float:
    """The share of foreign questions emptied, each (row, source) weighing the same."""
    shares = [e / n for r in rows for e, n in r.foreign.values() if n]
    return sum(shares) / max(1, len(shares))


def highest_bars(groups: dict[tuple[str, str], list[dict[str, Any]]], cap: float,
                 step: float = 0.01) -> tuple[float, float]:
    """The highest ANSWER_BAR (judged on the vector, hybrid and rerank rows) and KEYWORD_MODE_BAR
    (the keyword rows), on a `step` grid, at which no row costs more than `cap` (a higher bar only
    ever empties more). KEYWORD_BAR is not replayed: it judges only a KB of fewer than DEPTH
    passages, or keyword mode when the vector search fails, and no dump holds either."""
    def highest(keyword_mode: bool) -> float:
        bar = 0.0
        while bar <= 2.0:
            trial = round(bar + step, 4)
            rows = [r for r in replay(groups, trial, trial) if (r.mode == "keyword") == keyword_mode]
            if any(cost(r) > cap for r in rows):
                break
            bar = trial
        return bar
    return highest(False), highest(True)


def replay_report(groups: dict[tuple[str, str], list[dict[str, Any]]], bars: str, cap: float) -> str:
    """The table at the chosen bars; with `cap`, also each collection held out: the bars the
    others allow and what they cost it (whether the pick is tuned to one collection)."""
    from lucidrag.retrieval import relevance

    if cap:
        answer_bar, keyword_mode_bar = highest_bars(groups, cap)
    elif bars:
        answer_bar, keyword_mode_bar = (float(b) for b in bars.split(","))
    else:
        calibrated = any(r.get("background") is not None for records in groups.values() for r in records)
        anchored = any(r.get("anchor") is not None for records in groups.values() for r in records)
        answer_bar, keyword_mode_bar = relevance.bar(False, calibrated, anchored), relevance.bar(True, calibrated)
    rows = replay(groups, answer_bar, keyword_mode_bar)
    lines = [f"answer bar {answer_bar:.2f}, keyword mode's {keyword_mode_bar:.2f}: worst own cost "
             f"{max(map(cost, rows), default=0.0):.4f}, foreign questions emptied {100 * foreign_share(rows):.0f} % "
             "(mean of every row's sources)", "", table(rows)]
    if cap:
        lines.append("")
        for kb in sorted({kb for _, kb in groups}):
            allowed = highest_bars({key: records for key, records in groups.items() if key[1] != kb}, cap)
            held = replay({key: records for key, records in groups.items() if key[1] == kb}, *allowed)
            lines.append(f"{kb} held out: the others allow {allowed[0]:.2f} / {allowed[1]:.2f}, costing it "
                         f"{max(map(cost, held)):.4f}, emptying {100 * foreign_share(held):.0f} % of its foreign "
                         "questions")
    return "\n".join(lines)


def row_text(row: Row) -> str:
    foreign = ", ".join(f"{s} {e}/{n}" for s, (e, n) in row.foreign.items())
    return (f"nDCG@10 {row.real_off_ndcg:.4f} → {row.real_on_ndcg:.4f}, R@5 {row.real_off_recall:.4f} → "
            f"{row.real_on_recall:.4f}, own emptied {row.real_emptied}/{row.real_queries}; foreign emptied {foreign}")


def table(rows: Sequence[Row]) -> str:
    lines = ["| model | KB (own questions) | mode | nDCG@10 off → auto | Recall@5 off → auto | own questions "
             "emptied | foreign questions answered with nothing |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        foreign = ", ".join(f"{s} {100 * e / n:.0f} %" for s, (e, n) in r.foreign.items() if n)
        lines.append(f"| {r.model} | {r.kb} ({r.real_queries}) | {r.mode} | {r.real_off_ndcg:.4f} → "
                     f"{r.real_on_ndcg:.4f} ({r.real_on_ndcg - r.real_off_ndcg:+.4f}) | {r.real_off_recall:.4f} → "
                     f"{r.real_on_recall:.4f} ({r.real_on_recall - r.real_off_recall:+.4f}) | "
                     f"{r.real_emptied} | {foreign} |")
    return "\n".join(lines)


async def latency(size: int, n_questions: int) -> list[str]:
    """Engine time per question (wall minus time in host calls) with the cut off and on, per
    mode, on a KB of `size` synthetic chunks (bench_keyword's generator, hash embedder)."""
    import statistics

    from bench.bench_keyword import Corpus, make_files, make_queries
    from tests.conftest import Harness

    corpus = Corpus(7)
    files = make_files(corpus, size)
    questions = [q for q, _ in make_queries(corpus, files, n_questions)]
    host = BenchHost(lambda ts: [hash_embed(t) for t in ts])
    harness = Harness(host)
    creation = {"chunking": "fixed", "chunk_size": 400, "chunk_overlap": 0}
    await harness.create("scale", creation)
    for file_id, chunks in files.items():
        await harness.ingest("scale", f"{file_id}.txt", "".join(t for _, t in chunks).encode(), settings=creation,
                             document_id=file_id)
    await harness.retrieve("scale", "warm up", settings={"search_mode": "keyword"}, creation=creation)
    lines = []
    for mode in ("vector", "keyword", "hybrid"):
        for cut in ("off", "auto"):
            times, emptied = [], 0
            for question in questions:
                host.query_mode = True
                h0, t0 = host.host_time, time.perf_counter()
                response = await harness.retrieve("scale", question, creation=creation,
                                                  settings={"search_mode": mode, "relevance_cut": cut})
                times.append((time.perf_counter() - t0 - (host.host_time - h0)) * 1000)
                host.query_mode = False
                emptied += not response.results
            times.sort()
            lines.append(f"{size:,} chunks, {mode}, cut {cut}: engine ms p50 {statistics.median(times):.1f}, "
                         f"p95 {times[int(0.95 * (len(times) - 1))]:.1f}, mean {statistics.mean(times):.1f}; "
                         f"{emptied} of {len(questions)} emptied")
            print(lines[-1], flush=True)
    index = host.engine.installation("dedicated").kb("scale").index  # what vector mode adds: one BM25 top 20
    cpu = []
    for question in questions:
        t0 = time.process_time()
        index.search(question, 20)
        cpu.append((time.process_time() - t0) * 1000)
    cpu.sort()
    lines.append(f"{size:,} chunks: the BM25 top 20 vector mode adds, CPU ms p50 {statistics.median(cpu):.1f}, "
                 f"p95 {cpu[int(0.95 * (len(cpu) - 1))]:.1f}")
    print(lines[-1], flush=True)
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kbs", default="scifact,medquad,drcd,cmrc")
    parser.add_argument("--models", default="minilm,e5")
    parser.add_argument("--queries", type=int, default=100, help="own questions per KB")
    parser.add_argument("--docs", type=int, default=400, help="documents per KB (judged ones always kept)")
    parser.add_argument("--foreign", type=int, default=100, help="questions of each other collection")
    parser.add_argument("--modes", default="vector,keyword,hybrid")
    parser.add_argument("--rerank", action="store_true", help="also hybrid with a stand-in rerank model")
    parser.add_argument("--cross-language", action="store_true", help="also ask other languages' questions")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--patch", action="append", default=[])
    parser.add_argument("--dump", default="")
    parser.add_argument("--latency", type=int, default=0,
                        help="instead: engine time with the cut off and on, on this many synthetic chunks")
    parser.add_argument("--replay", default="", help="instead: the table from --dump files (comma-separated; "
                        "a later file's (model, KB) replaces an earlier one's), judged again")
    parser.add_argument("--without-anchor", action="store_true",
                        help="with --replay: judge as if no KB had an anchor (the cut before them)")
    parser.add_argument("--bars", default="", help="with --replay: ANSWER_BAR,KEYWORD_MODE_BAR (default: the code's)")
    parser.add_argument("--cap", type=float, default=0.0,
                        help="with --replay: instead of --bars, the highest bars costing no row more than this")
    args = parser.parse_args(argv)
    if args.latency:
        asyncio.run(latency(args.latency, 200))
        return
    if args.replay:
        print(replay_report(read_dumps(args.replay.split(","), not args.without_anchor), args.bars, args.cap))
        return
    code = code_version()
    apply_patches(args.patch)
    from bench.lib.embedders import get_embedder

    recorder = Recorder()
    dump = open(args.dump, "a", encoding="utf-8") if args.dump else None
    if dump:
        recorder.install()
    rows: list[Row] = []
    for model in args.models.split(","):
        embedder = get_embedder(model)
        for kb in args.kbs.split(","):
            rows += asyncio.run(run_kb(model, kb, args, embedder, recorder, dump))
    print(f"\ncode {code}; {args.queries} own questions and {args.docs} documents per KB, {args.foreign} questions "
          f"of each other collection; top_k {TOP_K}\n")
    print(table(rows))


if __name__ == "__main__":
    main()
