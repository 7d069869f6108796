"""Retrieval quality and engine latency of LucidRAG on vendored public test collections.

    .venv-bench/bin/python bench/bench_retrieval.py [--dataset scifact|cisi|medquad|medquad-pages|drcd|cmrc|all]
        [--model minilm|e5|auto] [--queries N] [--docs N] [--seed S] [--configs a,b,...]
        [--top-k 10,5] [--patch MODULE.NAME=VALUE ...] [--json OUT]
    .venv-bench/bin/python bench/bench_retrieval.py --scale [--sizes 10000,100000]

Quality mode ingests a dataset (bench/lib/datasets.py) through the REAL component
(components/knowledge_engine/lucid_rag.py via tests.conftest.Harness) against the contract-
following fake host (tests/fakes.py: squared-L2 distances like Chroma, flat metadata, every
call counted). Every corpus document becomes one uploaded ``<doc id>.txt`` file holding
``title + "\\n\\n" + text`` (a Markdown set's ``<doc id>.md``: ``"# " + title``, then its
sections); a result's ``metadata.file_id`` maps back to the document, so the
relevance judgments apply at document level: results (top_k chunks, 10 unless ``--top-k``; a
list such as 10,5 runs every configuration at each on the same ingest) are deduplicated by
document in rank order, then nDCG@10, Recall@5 and MRR@10 are computed. The last table lists
every collection with hybrid's margin over the best baseline at each top_k.

The embedding model is real (bench/lib/embedders.py, cached in ~/.cache/lucidrag-bench). The host
subclass below embeds a whole ``invoke_embedding`` batch in one model call, uses the query side
of the model (e5's "query: " prefix) while a retrieve is running, and times every host method so
that the engine's own latency = wall time of the retrieve hook − time spent inside host methods.
Before the real ingest, one dry-run ingest with the hash embedder records every text the engine
will embed, so the model sees large batches (the per-file calls then hit the cache).

Configurations (one KB per chunking):
  naive          fixed 500-character chunks, no overlap, vector only (the LangBot docs example)
  vector         LucidRAG defaults (structure chunking 512/64), search_mode=vector
  keyword        search_mode=keyword (BM25)
  hybrid         search_mode=hybrid, vector_weight 0.5 (the default)
  hybrid+cw1     hybrid, context_window=1
  hybrid@0.3 / hybrid@0.7   other vector weights
  doc-vector     one chunk per document (fixed, 8000 characters), vector only
  doc-bm25       the same KB, keyword only
  doc-rrf        doc-vector and doc-bm25 rankings (50 documents each) fused by reciprocal rank, k=60
  (rerank: no cross-encoder ships offline in a PyPI package, so there is no rerank row)

``--patch lucidrag.retrieval.fusion.DIVERSITY_MARGIN=0.3`` sets a module attribute before running (to measure a
proposed change without editing lucidrag/); it may be repeated.

Scale mode (``--scale``) ingests synthetic mixed English/Chinese chunks (bench/bench_keyword.py's
generator) with the hash embedder at 10k and 100k chunks and reports the engine-side retrieve
latency per mode (host time excluded) and the keyword index memory (tracemalloc).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import math
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.conftest import FakePlugin, Harness  # noqa: E402
from tests.fakes import hash_embed  # noqa: E402

INSTALLATION = "dedicated"
TOP_K = 10
HOST_METHODS = (
    "invoke_embedding", "invoke_rerank", "vector_upsert", "vector_search", "vector_delete",
    "vector_list", "get_knowledge_file_stream", "set_plugin_storage", "get_plugin_storage",
    "get_plugin_storage_keys", "delete_plugin_storage",
)

BatchEmbed = Callable[[list[str]], list[list[float]]]


# ------------------------------------------------------------------------------------ host
class BenchHost(FakePlugin):
    """FakePlugin with batch embedding through a real model, query/document sides, a numpy
    vector search (same results as FakeHost's, much faster) and per-method timing.

    ``doc_embed`` / ``query_embed`` take a list of texts and return one vector per text.
    ``host_time`` accumulates seconds spent inside host methods; ``calls`` counts as FakeHost.
    """

    def __init__(self, doc_embed: BatchEmbed, query_embed: BatchEmbed | None = None, **kwargs: Any) -> None:
        super().__init__(embed=lambda t: doc_embed([t])[0], **kwargs)
        self.doc_embed = doc_embed
        self.query_embed = query_embed or doc_embed
        self.query_mode = False
        self.host_time = 0.0
        self.recorded: list[str] | None = None  # dry run: texts the engine asked to embed
        self._matrix: dict[str, Any] = {}  # collection → (ids, metas, matrix, sq norms) or absent
        self._by_file: dict[str, dict[str, dict[str, None]]] = {}  # collection → file_id → chunk ids
        try:
            import numpy
            self._np = numpy
        except ImportError:  # CI venv: FakeHost's pure-Python search
            self._np = None

    async def invoke_embedding(self, embedding_model_uuid: str, texts: list[str]) -> list[list[float]]:
        self._enter("invoke_embedding", embedding_model_uuid=embedding_model_uuid, texts=texts)
        if self.max_embed_batch is not None and len(texts) > self.max_embed_batch:
            raise RuntimeError(f"batch size {len(texts)} exceeds the maximum of {self.max_embed_batch}")
        self.embedded_texts += len(texts)
        if self.recorded is not None and not self.query_mode:
            self.recorded.extend(texts)
        if self.query_mode:
            return [list(map(float, v)) for v in self.query_embed(list(texts))]
        # the relevance cut's probes are questions: embedded as the questions are (e5's "query: ")
        from lucidrag.index.probes import ALL_PROBES

        probes = [t for t in texts if t in ALL_PROBES]
        by_text = dict(zip(probes, self.query_embed(probes))) if probes else {}
        passages = [t for t in texts if t not in by_text]
        by_text.update(zip(passages, self.doc_embed(passages)) if passages else ())
        return [list(map(float, by_text[t])) for t in texts]

    async def vector_upsert(self, collection_id: str, vectors: list[list[float]], ids: list[str],
                            metadata: list[dict[str, Any]] | None = None,
                            documents: list[str] | None = None) -> None:
        self._matrix.pop(collection_id, None)
        await super().vector_upsert(collection_id, vectors, ids, metadata, documents)
        by_file = self._by_file.setdefault(collection_id, {})
        for chunk_id, meta in zip(ids, metadata or [{}] * len(ids)):
            by_file.setdefault(str(meta.get("file_id")), {})[chunk_id] = None  # ordered set

    async def vector_delete(self, collection_id: str, file_ids: list[str] | None = None,
                            filters: dict[str, Any] | None = None) -> int:
        self._matrix.pop(collection_id, None)
        if file_ids and not filters and not self.faults and self.default_dim_is_unset():
            # FakeHost scans the whole collection per call (quadratic over a bulk upload):
            # drop exactly the same vectors through the file_id → chunk ids map instead
            self._enter("vector_delete", collection_id=collection_id, file_ids=file_ids)
            collection = self.collections.get(collection_id, {})
            for file_id in file_ids:
                for chunk_id in self._by_file.get(collection_id, {}).pop(str(file_id), {}):
                    collection.pop(chunk_id, None)
            return len(file_ids)
        for file_id in file_ids or []:
            self._by_file.get(collection_id, {}).pop(str(file_id), None)
        return await super().vector_delete(collection_id, file_ids, filters)

    def default_dim_is_unset(self) -> bool:
        return getattr(self, "default_dim", None) is None and not getattr(self, "strip_filters", False)

    async def vector_search(self, collection_id: str, query_vector: list[float], top_k: int = 5,
                            filters: dict[str, Any] | None = None, search_type: str = "vector",
                            query_text: str = "", vector_weight: float | None = None) -> list[dict[str, Any]]:
        np = self._np
        simple_file = (isinstance(filters, dict) and len(filters) == 1 and isinstance(filters.get("file_id"), str))
        if simple_file and self.metric == "squared_l2":
            # what FakeHost computes, restricted to that file's vectors without scanning the collection
            self._enter("vector_search", collection_id=collection_id, filters=filters)
            items = self.collections.get(collection_id, {})
            scored = []
            for chunk_id in self._by_file.get(collection_id, {}).get(filters["file_id"], {}):
                vector, meta = items[chunk_id]
                squared = sum((a - b) ** 2 for a, b in zip(vector, query_vector))
                scored.append({"id": chunk_id, "distance": squared, "metadata": dict(meta)})
            scored.sort(key=lambda r: r["distance"])
            return scored[:top_k]
        if np is None or filters or self.metric != "squared_l2":
            return await super().vector_search(collection_id, query_vector, top_k, filters, search_type,
                                               query_text, vector_weight)
        self._enter("vector_search", collection_id=collection_id, filters=filters)
        cached = self._matrix.get(collection_id)
        if cached is None:
            items = self.collections.get(collection_id, {})
            ids = list(items)
            metas = [items[i][1] for i in ids]
            matrix = np.asarray([items[i][0] for i in ids], dtype=np.float64).reshape(len(ids), -1)
            cached = self._matrix[collection_id] = (ids, metas, matrix, (matrix * matrix).sum(1))
        ids, metas, matrix, sq = cached
        if not ids:
            return []
        q = np.asarray(query_vector, dtype=np.float64)
        dist = ((matrix - q) ** 2).sum(1)
        order = np.argsort(dist, kind="stable")[:top_k]  # ties keep insertion order, as FakeHost
        return [{"id": ids[i], "distance": float(dist[i]), "metadata": dict(metas[i])} for i in order]


def _timed(name: str):
    async def method(self: BenchHost, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await getattr(super(BenchHost, self), name)(*args, **kwargs) if name not in _OWN \
                else await _OWN[name](self, *args, **kwargs)
        finally:
            self.host_time += time.perf_counter() - t0
    method.__name__ = name
    return method


_OWN = {n: BenchHost.__dict__[n] for n in ("invoke_embedding", "vector_upsert", "vector_delete", "vector_search")}
for _name in HOST_METHODS:
    setattr(BenchHost, _name, _timed(_name))


# ------------------------------------------------------------------------------------ runner
@dataclass
class Config:
    name: str
    kb: str  # which KB (chunking) it queries
    settings: dict[str, Any]
    label: str


CHUNKINGS: dict[str, dict[str, Any]] = {
    "naive": {"chunking": "fixed", "chunk_size": 500, "chunk_overlap": 0},
    "lucid": {},  # creation defaults: structure, 512, 64
    "doc": {"chunking": "fixed", "chunk_size": 8000, "chunk_overlap": 0},  # one chunk per document
}

CONFIGS: list[Config] = [
    Config("naive", "naive", {"search_mode": "vector"}, "naive: fixed 500-char chunks, vector only"),
    Config("vector", "lucid", {"search_mode": "vector"}, "LucidRAG vector"),
    Config("keyword", "lucid", {"search_mode": "keyword"}, "LucidRAG keyword (BM25)"),
    Config("hybrid", "lucid", {"search_mode": "hybrid"}, "LucidRAG hybrid (vector_weight 0.5, default)"),
    Config("hybrid+cw1", "lucid", {"search_mode": "hybrid", "context_window": 1}, "hybrid + context_window 1"),
    Config("hybrid@0.3", "lucid", {"search_mode": "hybrid", "vector_weight": 0.3}, "hybrid, vector_weight 0.3"),
    Config("hybrid@0.7", "lucid", {"search_mode": "hybrid", "vector_weight": 0.7}, "hybrid, vector_weight 0.7"),
    Config("doc-vector", "doc", {"search_mode": "vector"}, "one embedding per whole document, vector only"),
    Config("doc-bm25", "doc", {"search_mode": "keyword"}, "document-level BM25 (one chunk per document)"),
    Config("doc-rrf", "doc", {"fuse": ("vector", "keyword")},
           "doc-vector and doc-bm25 fused by reciprocal rank (k=60)"),
]
# The bar: hybrid must beat the best of these by TARGET_MARGIN nDCG@10, at every top_k measured.
BASELINES = ("vector", "keyword", "doc-vector", "doc-bm25", "doc-rrf")
TARGET_MARGIN = 0.03
DOC_RRF_K = 60
DOC_RRF_DEPTH = 50  # documents taken from each list before fusing (the engine's top_k limit)


@dataclass
class Result:
    config: Config
    top_k: int
    ndcg10: float
    recall5: float
    mrr10: float
    calls_per_query: float
    calls_breakdown: dict[str, float]
    engine_ms: float  # mean engine-side latency per query (host time excluded)
    engine_ms_p95: float
    n_queries: int
    per_query: dict[str, list[str]] = field(default_factory=dict, repr=False)


def doc_file_name(doc_id: str, ext: str = ".txt") -> str:
    return f"{doc_id}{ext}"


def file_body(title: str, text: str, ext: str) -> str:
    """What the uploaded file holds: a Markdown file's title is its `#` heading."""
    if not title:
        return text
    return f"# {title}\n\n{text}" if ext == ".md" else f"{title}\n\n{text}"


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = DOC_RRF_K) -> list[str]:
    """Documents by the sum of 1 / (k + rank) over the rankings; ties keep first-seen order."""
    score: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            score[doc] = score.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(score, key=lambda d: -score[d])


def metrics(ranked: Sequence[str], relevant: dict[str, int]) -> tuple[float, float, float]:
    """nDCG@10 (graded gains), Recall@5, MRR@10 of one query's deduplicated document ranking."""
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(relevant.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    positives = {d for d, g in relevant.items() if g > 0}
    recall = len(positives & set(ranked[:5])) / len(positives) if positives else 0.0
    mrr = next((1.0 / (i + 1) for i, d in enumerate(ranked[:10]) if relevant.get(d, 0) > 0), 0.0)
    return (dcg / idcg if idcg else 0.0), recall, mrr


class Bench:
    """Ingests a corpus into one KB per chunking and runs the configurations' queries."""

    def __init__(self, host: BenchHost) -> None:
        self.host = host
        self.harness = Harness(host)
        self.file_to_doc: dict[str, str] = {}
        self.ingest_seconds: dict[str, float] = {}
        self.chunks: dict[str, int] = {}
        self.cold_load: dict[str, tuple[int, float]] = {}
        self.ingest_calls: dict[str, dict[str, float]] = {}  # kb → host calls per uploaded file

    async def ingest(self, kb: str, corpus: dict[str, tuple[str, str]], creation: dict[str, Any],
                     progress: bool = False, file_ext: str = ".txt") -> None:
        t0 = time.perf_counter()
        total = 0
        calls_before = Counter(self.host.calls)
        await self.harness.create(kb, creation)
        for i, (doc_id, (title, text)) in enumerate(corpus.items()):
            body = file_body(title, text, file_ext)
            result = await self.harness.ingest(kb, doc_file_name(doc_id, file_ext), body.encode("utf-8"), settings=creation,
                                               document_id=f"{kb}:{doc_id}")
            if str(getattr(result.status, "value", result.status)).lower() != "completed":
                raise RuntimeError(f"ingest of {doc_id} failed: {result.error_message if hasattr(result, 'error_message') else result}")
            total += result.chunks_created
            self.file_to_doc[f"{kb}:{doc_id}"] = doc_id
            if progress and (i + 1) % 1000 == 0:
                print(f"    {kb}: {i + 1}/{len(corpus)} files, {total} chunks, {time.perf_counter() - t0:.0f} s",
                      file=sys.stderr, flush=True)
        self.ingest_seconds[kb] = time.perf_counter() - t0
        self.chunks[kb] = total
        self.ingest_calls[kb] = {k: v / max(1, len(corpus)) for k, v in sorted((Counter(self.host.calls) - calls_before).items())}

    async def retrieve(self, kb: str, query: str, settings: dict[str, Any], creation: dict[str, Any]):
        if "fuse" in settings:
            raise ValueError("a fused configuration has no single retrieve")
        self.host.query_mode = True
        try:
            return await self.harness.retrieve(kb, query, settings={"top_k": TOP_K, **settings}, creation=creation)
        finally:
            self.host.query_mode = False

    async def ranked_docs(self, config: Config, query: str, settings: dict[str, Any],
                          creation: dict[str, Any]) -> list[str]:
        """The documents of one retrieve's results, deduplicated in rank order."""
        response = await self.retrieve(config.kb, query, settings, creation)
        if response.metadata and response.metadata.get("error"):
            raise RuntimeError(f"{config.name}: retrieve failed: {response.metadata['error']}")
        return list(dict.fromkeys(self.file_to_doc.get(str(e.metadata.get("file_id")), "?")
                                  for e in response.results))

    async def warm(self, kb: str, creation: dict[str, Any]) -> None:
        """First query after ingest loads the KB state from plugin storage: count it apart."""
        before = sum(self.host.calls.values())
        t0 = time.perf_counter()
        await self.retrieve(kb, "warm up", {"search_mode": "keyword"}, creation)
        self.cold_load[kb] = (sum(self.host.calls.values()) - before, time.perf_counter() - t0)

    async def run(self, config: Config, queries: dict[str, str], qrels: dict[str, dict[str, int]],
                  creation: dict[str, Any]) -> Result:
        host = self.host
        sums = [0.0, 0.0, 0.0]
        lat: list[float] = []
        calls = Counter()
        per_query: dict[str, list[str]] = {}
        for qid, text in queries.items():
            before = Counter(host.calls)
            h0 = host.host_time
            t0 = time.perf_counter()
            if "fuse" in config.settings:
                lists = [await self.ranked_docs(config, text, {"search_mode": mode, "top_k": DOC_RRF_DEPTH}, creation)
                         for mode in config.settings["fuse"]]
                ranked = reciprocal_rank_fusion(lists)[:TOP_K]
            else:
                ranked = await self.ranked_docs(config, text, config.settings, creation)
            wall = time.perf_counter() - t0
            lat.append((wall - (host.host_time - h0)) * 1000)
            calls.update(Counter(host.calls) - before)
            per_query[qid] = ranked
            for i, v in enumerate(metrics(ranked, qrels.get(qid, {}))):
                sums[i] += v
        n = max(1, len(queries))
        lat.sort()
        return Result(config, TOP_K, sums[0] / n, sums[1] / n, sums[2] / n, sum(calls.values()) / n,
                      {k: v / n for k, v in sorted(calls.items())}, statistics.mean(lat) if lat else 0.0,
                      lat[int(0.95 * (len(lat) - 1))] if lat else 0.0, len(queries), per_query)


async def evaluate(corpus: dict[str, tuple[str, str]], queries: dict[str, str], qrels: dict[str, dict[str, int]],
                   doc_embed: BatchEmbed, query_embed: BatchEmbed, configs: Sequence[Config] = CONFIGS,
                   prewarm: BatchEmbed | None = None, progress: bool = False,
                   variants: Sequence[str] = (), file_ext: str = ".txt",
                   top_ks: Sequence[int] = ()) -> tuple[list[Result], Bench]:
    """The benchmark's core: ingest `corpus` once per chunking the configs need, run every config.

    `prewarm(texts)`, if given, is called with every text the engine will embed (found by a dry
    run with the hash embedder) before the real ingest, so a slow model sees big batches."""
    kbs = list(dict.fromkeys(c.kb for c in configs))
    if prewarm is not None:
        dry = BenchHost(lambda ts: [hash_embed(t) for t in ts])
        dry.recorded = []
        dry_bench = Bench(dry)
        t0 = time.perf_counter()
        for kb in kbs:
            await dry_bench.ingest(kb, corpus, CHUNKINGS[kb], file_ext=file_ext)
        texts = list(dict.fromkeys(dry.recorded))
        if progress:
            print(f"  dry run: {len(texts)} distinct chunk texts in {time.perf_counter() - t0:.1f} s; embedding ...",
                  file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        prewarm(texts)
        if progress:
            print(f"  embedded in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        del dry, dry_bench
        gc.collect()
    host = BenchHost(doc_embed, query_embed)
    bench = Bench(host)
    for kb in kbs:
        await bench.ingest(kb, corpus, CHUNKINGS[kb], progress=progress, file_ext=file_ext)
        await bench.warm(kb, CHUNKINGS[kb])
        if progress:
            print(f"  ingested kb={kb}: {bench.chunks[kb]} chunks in {bench.ingest_seconds[kb]:.1f} s",
                  file=sys.stderr, flush=True)
    results = []
    for top_k in top_ks or (TOP_K,):
        globals()["TOP_K"] = top_k
        for config in configs:
            t0 = time.perf_counter()
            results.append(await bench.run(config, queries, qrels, CHUNKINGS[config.kb]))
            if progress:
                r = results[-1]
                print(f"  {config.name} (top_k {top_k}): nDCG@10 {r.ndcg10:.4f} ({time.perf_counter() - t0:.1f} s)",
                      file=sys.stderr, flush=True)
        if variants:
            results += [r for _, r in await run_variants(bench, variants, queries, qrels)]
    return results, bench


def markdown_table(results: Sequence[Result]) -> str:
    lines = ["| configuration | top_k | nDCG@10 | Recall@5 | MRR@10 | host calls / query | engine ms / query (mean, p95) |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        breakdown = ", ".join(f"{k.replace('invoke_', '').replace('vector_', '')} {v:g}" for k, v in r.calls_breakdown.items())
        lines.append(f"| {r.config.label} | {r.top_k} | {r.ndcg10:.4f} | {r.recall5:.4f} | {r.mrr10:.4f} | "
                     f"{r.calls_per_query:g} ({breakdown}) | {r.engine_ms:.2f}, {r.engine_ms_p95:.2f} |")
    return "\n".join(lines)


def comparison(results: Sequence[Result]) -> str:
    out = []
    for top_k in dict.fromkeys(r.top_k for r in results):
        by = {r.config.name: r for r in results if r.top_k == top_k}
        if not {"hybrid", "vector", "keyword"} <= set(by):
            continue
        h, v, k = by["hybrid"], by["vector"], by["keyword"]
        for metric in ("ndcg10", "recall5", "mrr10"):
            hv, vv, kv = getattr(h, metric), getattr(v, metric), getattr(k, metric)
            out.append(f"top_k {top_k} {metric}: hybrid {hv:.4f} vs vector {vv:.4f} ({hv - vv:+.4f}) vs keyword "
                       f"{kv:.4f} ({hv - kv:+.4f}) -> {'BEATS BOTH' if hv > vv and hv > kv else 'does NOT beat both'}")
        margin = bar_margin(by)
        if margin is not None:
            best, value = margin
            out.append(f"top_k {top_k} ndcg10 vs the best baseline ({best} {by[best].ndcg10:.4f}): {value:+.4f} -> "
                       + ("meets" if value >= TARGET_MARGIN else "MISSES") + f" the +{TARGET_MARGIN} bar")
        if "doc-vector" in by:
            gap = v.ndcg10 - by["doc-vector"].ndcg10
            out.append(f"top_k {top_k} ndcg10 vector - doc-vector: {gap:+.4f} -> "
                       + ("vector >= doc-vector" if gap >= 0 else "vector BELOW doc-vector"))
    return "\n".join(out)


def bar_margin(by: dict[str, Result]) -> tuple[str, float] | None:
    """(best baseline, hybrid − its nDCG@10) when every baseline was measured, else None."""
    if "hybrid" not in by or not all(b in by for b in BASELINES):
        return None
    best = max(BASELINES, key=lambda b: by[b].ndcg10)
    return best, by["hybrid"].ndcg10 - by[best].ndcg10


def summary_table(runs: Sequence[tuple[str, Sequence[Result]]]) -> str:
    """One row per collection: nDCG@10 of every configuration at the first top_k, then hybrid's
    margin over the best baseline at each top_k and whether vector >= doc-vector."""
    top_ks = list(dict.fromkeys(r.top_k for _, results in runs for r in results))
    names = list(dict.fromkeys(r.config.name for _, results in runs for r in results if "[" not in r.config.name))
    head = ["collection"] + [f"{n} @{top_ks[0]}" for n in names] \
        + [f"hybrid − best baseline @{k}" for k in top_ks] + ["vector ≥ doc-vector"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for dataset, results in runs:
        first = {r.config.name: r for r in results if r.top_k == top_ks[0]}
        row = [dataset] + [f"{first[n].ndcg10:.4f}" if n in first else "" for n in names]
        for k in top_ks:
            margin = bar_margin({r.config.name: r for r in results if r.top_k == k})
            row.append(f"{margin[1]:+.4f} ({margin[0]})" if margin else "")
        gaps = [by["vector"].ndcg10 - by["doc-vector"].ndcg10
                for k in top_ks
                for by in [{r.config.name: r for r in results if r.top_k == k}]
                if {"vector", "doc-vector"} <= set(by)]
        row.append(("yes" if all(g >= 0 for g in gaps) else "no") + " (" + ", ".join(f"{g:+.4f}" for g in gaps) + ")"
                   if gaps else "")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ variants
# Proposed changes, measured by monkeypatching lucidrag at run time on the already ingested KB
# (lucidrag/ itself is not edited). Each entry: name → (what it changes, apply(bench) → undo()).

def _set_attr(obj: Any, name: str, value: Any) -> Callable[[], None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    return lambda: setattr(obj, name, old)


def _rrf_k(k: int):
    """Weighted RRF with constant k (bench/lib/rrf.py)."""
    def apply(bench: Bench) -> Callable[[], None]:
        from bench.lib.rrf import fuse_rrf
        from lucidrag.retrieval import retrieve as r

        def fuse(vector, keyword, vector_weight, *_: Any):
            return fuse_rrf(vector, keyword, vector_weight, k=k)
        return _set_attr(r, "fuse", fuse)
    return apply


def _pool(vector: int | None, keyword: int | None):
    def apply(bench: Bench) -> Callable[[], None]:
        from lucidrag.retrieval import retrieve as r
        vc, kc = r._vector_candidates, r._keyword_candidates

        async def vec(host, state, embedder, request, pool):
            return await vc(host, state, embedder, request, vector or pool)

        def kw(state, request, pool):
            return kc(state, request, keyword or pool)
        u1 = _set_attr(r, "_vector_candidates", vec)
        u2 = _set_attr(r, "_keyword_candidates", kw)
        return lambda: (u1(), u2())
    return apply


def _bm25(k1: float, b: float):
    def apply(bench: Bench) -> Callable[[], None]:
        undos = []
        for inst in bench.host.engine.installations.values():
            for state in inst.kbs.values():
                undos += [_set_attr(state.index, "k1", k1), _set_attr(state.index, "b", b)]
        return lambda: [u() for u in undos]
    return apply


def _query_unigrams(bench: Bench) -> Callable[[], None]:
    """Query side also emits the CJK unigrams the documents are indexed with (full weight)."""
    from lucidrag.index import terms as keyword
    return _set_attr(keyword, "QUERY_CJK_UNIGRAM_WEIGHT", 1.0)


def _keyword_score_normalised(bench: Bench) -> Callable[[], None]:
    """Keyword candidate score = BM25 / best BM25 of the query (keyword.normalise_scores) instead of
    clip01(raw BM25), which is 1.0 for almost every hit."""
    from lucidrag.retrieval import retrieve as r
    from lucidrag.retrieval.fusion import Candidate
    original = r._keyword_candidates

    def kw(state, request, pool):
        out = original(state, request, pool)
        raw = dict(state.index.search(request.query, top_k=pool * 3 if request.where else pool))
        top = max(raw.values(), default=0.0) or 1.0
        return [Candidate(c.chunk_id, raw.get(c.chunk_id, 0.0) / top) for c in out]
    return _set_attr(r, "_keyword_candidates", kw)


def _score_fusion(bench: Bench) -> Callable[[], None]:
    """Convex combination of min-max-normalised scores (vector cosine, BM25/max) instead of RRF."""
    from lucidrag.retrieval import retrieve as r
    from lucidrag.retrieval.fusion import Fused
    undo_kw = _keyword_score_normalised(bench)

    def fuse(vector, keyword, vector_weight, k=60):
        def norm(cands):
            if not cands:
                return {}
            lo, hi = min(c.score for c in cands), max(c.score for c in cands)
            return {c.chunk_id: ((c.score - lo) / (hi - lo) if hi > lo else 1.0) for c in cands}
        nv, nk = norm(vector), norm(keyword)
        sv = {c.chunk_id: c.score for c in vector}
        sk = {c.chunk_id: c.score for c in keyword}
        out = []
        for cid in dict.fromkeys([c.chunk_id for c in vector] + [c.chunk_id for c in keyword]):
            rank_value = vector_weight * nv.get(cid, 0.0) + (1 - vector_weight) * nk.get(cid, 0.0)
            score = vector_weight * sv.get(cid, 0.0) + (1 - vector_weight) * sk.get(cid, 0.0)
            out.append(Fused(cid, score, sv.get(cid), sk.get(cid), rank_value))
        out.sort(key=lambda f: f.rank_value, reverse=True)
        return out
    undo = _set_attr(r, "fuse", fuse)
    return lambda: (undo(), undo_kw())


def _module_setting(assignment: str) -> Callable[[], None]:
    """'lucidrag.retrieval.fusion.FILE_DIVERSITY=false' as a variant: set a query-time module constant."""
    target, _, raw = assignment.partition("=")
    module_name, _, attr = target.rpartition(".")
    if not module_name.startswith("lucidrag") or not raw:
        raise SystemExit(f"unknown variant {assignment!r} (a name from VARIANTS or lucidrag.MODULE.ATTR=VALUE)")
    module = importlib.import_module(module_name)
    if not hasattr(module, attr):
        raise SystemExit(f"variant {assignment!r}: {module_name} has no attribute {attr}")
    return _set_attr(module, attr, json.loads(raw))


VARIANTS: dict[str, tuple[str, Callable[[Bench], Callable[[], None]]]] = {
    "rrf": ("weighted RRF k=60 instead of the default ranking", _rrf_k(60)),
    "rrf_k=10": ("weighted RRF k=10", _rrf_k(10)),
    "rrf_k=20": ("weighted RRF k=20", _rrf_k(20)),
    "rrf_k=200": ("weighted RRF k=200", _rrf_k(200)),
    "pool=20": ("retrieve: candidate pool 20 per list (default max(4*top_k, 20) = 40)", _pool(20, 20)),
    "pool=100": ("retrieve: candidate pool 100 per list", _pool(100, 100)),
    "bm25=0.9/0.4": ("BM25Index k1=0.9, b=0.4 (bench/baseline.py; default 1.2/0.75)", _bm25(0.9, 0.4)),
    "bm25=1.5/0.75": ("BM25Index k1=1.5, b=0.75", _bm25(1.5, 0.75)),
    "query-unigrams": ("keyword.tokenize: queries also use CJK unigrams", _query_unigrams),
    "score-fusion": ("fusion: convex combination of min-max normalised scores, BM25 strength "
                     "(the script's own copy of lucidrag's default)", _score_fusion),
}


async def run_variants(bench: Bench, names: Sequence[str], queries, qrels,
                       modes: Sequence[str] = ("vector", "keyword", "hybrid")) -> list[tuple[str, Result]]:
    out = []
    by_name = {c.name: c for c in CONFIGS}
    for name in names:
        parts = name.split("+")  # "a+b": both changes at once
        description = "; ".join(VARIANTS[p][0] if p in VARIANTS else p for p in parts)
        undos = [VARIANTS[p][1](bench) if p in VARIANTS else _module_setting(p) for p in parts]

        def undo() -> None:
            for u in reversed(undos):
                u()
        try:
            for mode in modes:
                config = by_name[mode]
                result = await bench.run(config, queries, qrels, CHUNKINGS[config.kb])
                result.config = Config(f"{mode} [{name}]", config.kb, config.settings, f"{config.label} [{description}]")
                out.append((name, result))
                print(f"  variant {name} {mode}: nDCG@10 {result.ndcg10:.4f}", file=sys.stderr, flush=True)
        finally:
            undo()
    return out


# ------------------------------------------------------------------------------------ datasets
def subsample(ds, n_queries: int | None, n_docs: int | None, seed: int):
    """First `n_queries` queries (in a seeded shuffle) that have judgments; corpus = all their
    judged docs plus seeded random others up to `n_docs` (judged docs are never dropped)."""
    rng = random.Random(seed)
    qids = [q for q in ds.queries if ds.qrels.get(q)]
    rng.shuffle(qids)
    if n_queries:
        qids = qids[:n_queries]
    qids.sort(key=lambda q: (len(q), q))
    queries = {q: ds.queries[q] for q in qids}
    qrels = {q: {d: g for d, g in ds.qrels[q].items() if d in ds.corpus} for q in qids}
    corpus_ids = list(ds.corpus)
    if n_docs and n_docs < len(corpus_ids):
        judged = {d for q in qids for d in qrels[q]}
        others = [d for d in corpus_ids if d not in judged]
        rng.shuffle(others)
        keep = judged | set(others[: max(0, n_docs - len(judged))])
        corpus_ids = [d for d in corpus_ids if d in keep]
    return {d: ds.corpus[d] for d in corpus_ids}, queries, qrels


def code_version() -> str:
    """Commit of the tree and whether lucidrag/ differs from it (other engineers edit it live)."""
    import subprocess
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "lucidrag", "components"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"
    return f"{rev}{' + uncommitted lucidrag/ changes' if dirty else ''}"


def model_for(dataset: str, model: str) -> str:
    if model != "auto":
        return model
    from bench.lib.datasets import DATASETS

    return "minilm" if DATASETS[dataset].language == "en" else "e5"


def apply_patches(patches: Sequence[str]) -> None:
    for patch in patches:
        target, _, raw = patch.partition("=")
        module_name, _, attr = target.rpartition(".")
        module = importlib.import_module(module_name)
        if not hasattr(module, attr):
            raise SystemExit(f"--patch: {module_name} has no attribute {attr}")
        value = json.loads(raw) if raw[:1] in "-0123456789[{tfn\"" else raw
        setattr(module, attr, value)
        print(f"patched {module_name}.{attr} = {value!r}", file=sys.stderr)


def run_dataset(name: str, args) -> dict[str, Any]:
    from bench.lib.datasets import DATASETS, load_dataset
    from bench.lib.embedders import get_embedder

    ds = load_dataset(name)
    corpus, queries, qrels = subsample(ds, args.queries, args.docs, args.seed)
    model = model_for(name, args.model)
    t_load = time.perf_counter()
    embedder = get_embedder(model)
    print(f"\n## {name}: {len(corpus)} docs, {len(queries)} queries, model {model} ({embedder.name}, "
          f"loaded in {time.perf_counter() - t_load:.1f} s)", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    query_vectors = dict(zip(queries.values(), embedder.embed_queries(list(queries.values()))))
    t_queries = time.perf_counter() - t0

    def query_embed(texts: list[str]) -> list[list[float]]:
        missing = [t for t in texts if t not in query_vectors]
        if missing:
            query_vectors.update(zip(missing, embedder.embed_queries(missing)))
        return [query_vectors[t] for t in texts]

    def doc_embed(texts: list[str]) -> list[list[float]]:
        return embedder.embed_documents(texts)

    configs = [c for c in CONFIGS if not args.configs or c.name in args.configs.split(",")]
    t_start = time.perf_counter()
    variants = [v for v in args.variants.split(",") if v] if args.variants != "all" else list(VARIANTS)
    results, bench = asyncio.run(evaluate(corpus, queries, qrels, doc_embed, query_embed, configs,
                                          prewarm=doc_embed, progress=True, variants=variants,
                                          file_ext=DATASETS[name].file_ext, top_ks=args.top_k))
    elapsed = time.perf_counter() - t_start + t_queries
    info = DATASETS[name]
    print(f"\n### {name} — {info.description}")
    print(f"code {args.code}; " + (f"patches {args.patch}; " if args.patch else ""), end="")
    print(f"{len(corpus):,} docs, {len(queries)} queries, {sum(len(v) for v in qrels.values())} judgments; "
          f"model {embedder.name}; chunks: " + ", ".join(f"{kb} {n:,}" for kb, n in bench.chunks.items())
          + f"; run time {elapsed:.0f} s (embedding cache hits {getattr(embedder, 'hits', '?')}, "
          f"misses {getattr(embedder, 'misses', '?')})\n")
    print(markdown_table(results))
    print()
    print(comparison(results))
    for kb, calls in bench.ingest_calls.items():
        print(f"ingest (kb {kb}): {bench.ingest_seconds[kb]:.0f} s, host calls per file: "
              + ", ".join(f"{k} {v:.2f}" for k, v in calls.items()))
    for kb, (calls, secs) in bench.cold_load.items():
        print(f"first query after ingest (kb {kb}) loads the KB state: {calls} host calls, {secs:.2f} s")
    sys.stdout.flush()
    return {
        "dataset": name, "docs": len(corpus), "queries": len(queries), "model": embedder.name,
        "chunks": bench.chunks, "seconds": elapsed, "ingest_seconds": bench.ingest_seconds,
        "results": [{"config": r.config.name, "top_k": r.top_k, "ndcg10": r.ndcg10, "recall5": r.recall5, "mrr10": r.mrr10,
                     "calls_per_query": r.calls_per_query, "engine_ms": r.engine_ms,
                     "engine_ms_p95": r.engine_ms_p95} for r in results],
        "per_query": {f"{r.config.name}@{r.top_k}": r.per_query for r in results},
        "result_objects": results,
        "qrels": qrels,
    }


# ------------------------------------------------------------------------------------ scale
def scale(sizes: Sequence[int], n_queries: int, seed: int) -> None:
    from bench.bench_keyword import (  # the keyword benchmark's generator and memory measure
        Corpus,
        make_files,
        make_queries,
        raw_text_bytes,
        traced_index,
    )

    print("\n### engine-side retrieval latency at scale (hash embedder, host time excluded)\n")
    print("| chunks | files | ingest s | mode | engine ms / query p50 | p95 | mean | host calls / query |")
    print("|---|---|---|---|---|---|---|---|")
    mem_rows = []
    for size in sizes:
        corpus = Corpus(seed)
        files = make_files(corpus, size)
        queries = [q for q, _ in make_queries(corpus, files, n_queries)]
        host = BenchHost(lambda ts: [hash_embed(t) for t in ts])
        harness = Harness(host)
        creation = {"chunking": "fixed", "chunk_size": 400, "chunk_overlap": 0}

        async def go() -> None:
            t0 = time.perf_counter()
            n = 0
            await harness.create("scale", creation)
            for fid, chunks in files.items():
                body = "".join(text for _, text in chunks)  # 20 × 400 chars → 20 fixed chunks
                result = await harness.ingest("scale", f"{fid}.txt", body.encode(), settings=creation, document_id=fid)
                n += result.chunks_created
            t_ingest = time.perf_counter() - t0

            async def ask(q: str, settings: dict[str, Any]) -> None:
                host.query_mode = True
                try:
                    await harness.retrieve("scale", q, settings={"top_k": TOP_K, **settings}, creation=creation)
                finally:
                    host.query_mode = False

            await ask("warm up", {"search_mode": "keyword"})
            for mode, settings in (("vector", {"search_mode": "vector"}), ("keyword", {"search_mode": "keyword"}),
                                   ("hybrid", {"search_mode": "hybrid"}),
                                   ("hybrid+cw1", {"search_mode": "hybrid", "context_window": 1})):
                lat = []
                before = sum(host.calls.values())
                for q in queries:
                    h0 = host.host_time
                    t0 = time.perf_counter()
                    await ask(q, settings)
                    lat.append((time.perf_counter() - t0 - (host.host_time - h0)) * 1000)
                calls = (sum(host.calls.values()) - before) / len(queries)
                lat.sort()
                print(f"| {n:,} | {len(files):,} | {t_ingest:.0f} | {mode} | {statistics.median(lat):.2f} | "
                      f"{lat[int(0.95 * (len(lat) - 1))]:.2f} | {statistics.mean(lat):.2f} | {calls:g} |", flush=True)

        asyncio.run(go())
        del host, harness
        index, held, peak = traced_index(files)
        mem_rows.append(f"| {len(index):,} | {held / 2**20:.1f} MiB | {held / len(index):.0f} B "
                        f"| {peak / 2**20:.1f} MiB | {raw_text_bytes(files) / 2**20:.1f} MiB |")
        del index
        gc.collect()
    print("\n### keyword index memory (tracemalloc, BM25Index over the same chunks)\n")
    print("| chunks | index (current) | per chunk | peak while building | raw chunk text |")
    print("|---|---|---|---|---|")
    print("\n".join(mem_rows))


# ------------------------------------------------------------------------------------ main
DATASET_NAMES = ("scifact", "cisi", "medquad", "medquad-pages", "drcd", "cmrc")


def _int_list(raw: str) -> list[int]:
    return [int(x) for x in raw.split(",") if x.strip()]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="all", help=", ".join(DATASET_NAMES) + ", a comma list, or all")
    parser.add_argument("--model", default="auto", choices=["minilm", "e5", "auto"])
    parser.add_argument("--queries", type=int, default=None, help="queries per dataset (default: all)")
    parser.add_argument("--docs", type=int, default=None,
                        help="corpus size (judged docs of the selected queries are always kept; default: "
                             "all: scifact 3,000, drcd 5,017)")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--top-k", type=_int_list, default=[TOP_K],
                        help="results per query, or a comma list (e.g. 10,5) measured on the same ingest "
                             "(5 is the plugin's default)")
    parser.add_argument("--configs", default="", help="comma-separated subset of: " + ",".join(c.name for c in CONFIGS))
    parser.add_argument("--patch", action="append", default=[], help="MODULE.ATTR=VALUE, e.g. lucidrag.retrieval.fusion.DIVERSITY_MARGIN=0.3")
    parser.add_argument("--variants", default="", help="after the configs, re-run keyword and hybrid with "
                        "proposed changes patched in ('all' or a comma list of: " + ",".join(VARIANTS) + "; a+b combines)")
    parser.add_argument("--cjk-segmenter", default="", choices=["", "rjieba"],
                        help="index and query CJK runs with this segmenter's words instead of bigrams")
    parser.add_argument("--json", default="", help="also write the results (with per-query rankings) here")
    parser.add_argument("--scale", action="store_true", help="latency/memory at --sizes synthetic chunks instead")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--scale-queries", type=int, default=200)
    args = parser.parse_args(argv)
    args.code = code_version()  # lucidrag was imported just now, with the tree in this state
    globals()["TOP_K"] = args.top_k[0]
    apply_patches(args.patch)
    if args.cjk_segmenter == "rjieba":
        import rjieba  # benchmark-only; MIT, a wheel

        from lucidrag.index import terms as keyword

        def words(run: str) -> list[str]:
            return [w for w in rjieba.cut_for_search(run) if w.strip() and w not in keyword._CJK_STOP_CHARS]
        keyword.cjk_terms = words
        print("patched lucidrag.index.terms.cjk_terms = rjieba.cut_for_search", file=sys.stderr)
    if args.scale:
        scale([int(s) for s in args.sizes.split(",")], args.scale_queries, 7)
        return
    names = list(DATASET_NAMES) if args.dataset == "all" else args.dataset.split(",")
    unknown = [n for n in names if n not in DATASET_NAMES]
    if unknown:
        parser.error(f"--dataset: unknown {', '.join(unknown)} (choose from {', '.join(DATASET_NAMES)})")
    out = []
    docs_arg = args.docs
    for name in names:
        args.docs = docs_arg
        out.append(run_dataset(name, args))
    print("\n### all collections (nDCG@10)\n")
    print(summary_table([(o["dataset"], o.pop("result_objects")) for o in out]))
    if args.json:
        Path(args.json).write_text(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
