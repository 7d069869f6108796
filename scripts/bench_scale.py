#!/usr/bin/env python3
"""Scale: one KB of N documents x M chunks through the real component (tests.conftest.Harness).

  .venv/bin/python scripts/bench_scale.py --backend fake   --docs 5000 --chunks 20
  .venv/bin/python scripts/bench_scale.py --backend milvus --docs 5000 --chunks 20   # needs milvus-lite

`fake` is tests/fakes.FakeHost (Chroma-like, hash embedder). `milvus` is the same fake host with
its vector calls served by a real in-process Milvus Lite `MilvusClient`, doing what LangBot
4.11.2's adapter (langbot/pkg/vector/vdbs/milvus.py) does: the same schema (id, vector, text,
file_id, chunk_uuid), COSINE AUTOINDEX, `insert` + `load_collection` per upsert, filters reduced
to the kept fields, one `delete(filter='file_id == ...')` per file id, `query` with offset/limit.

Reports ingest throughput (chunks/s), host calls by method, the plugin process' peak memory
(tracemalloc peak of Python allocations, and ru_maxrss of the whole process, which includes the
in-process Milvus Lite), retrieval latency added by the engine (wall time minus time inside host
calls), and how long on_knowledge_base_delete takes (budget 30 s; the engine continues in the
background after 20 s -- the time until the background task is done is reported too).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import FakePlugin, Harness  # noqa: E402

KB = "kb-scale-0000"
WORDS = ("valve pump bearing gasket rotor stator flange impeller shaft coupling seal housing bolt "
         "torque pressure flow meter sensor relay breaker cable conduit panel inverter battery").split()


def document(i: int, chunks: int) -> bytes:
    """`chunks` paragraphs of ~170 characters: with chunk_size=200, one chunk each."""
    paras = []
    for j in range(chunks):
        w = [WORDS[(i * 7 + j * 3 + k) % len(WORDS)] for k in range(14)]
        paras.append(f"Doc {i} section {j}: part P{i}-{j} " + " ".join(w) + f" rated {i % 97}.{j} units.")
    return "\n\n".join(paras).encode()


class TimedHost(FakePlugin):
    """Counts time spent inside host calls, so engine time = wall - host."""

    host_time = 0.0

    def __getattribute__(self, name: str) -> Any:
        attr = super().__getattribute__(name)
        if name in ("vector_upsert", "vector_search", "vector_delete", "vector_list", "invoke_embedding",
                    "get_plugin_storage", "set_plugin_storage", "get_plugin_storage_keys",
                    "delete_plugin_storage", "get_knowledge_file_stream"):
            async def timed(*args: Any, **kwargs: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return await attr(*args, **kwargs)
                finally:
                    TimedHost.host_time += time.perf_counter() - t0
            return timed
        return attr


class MilvusLiteHost(TimedHost):
    """FakeHost whose vector calls go to a real Milvus Lite, like LangBot's adapter."""

    KEPT = {"text", "file_id", "chunk_uuid"}

    def __init__(self, uri: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from pymilvus import MilvusClient

        self.client = MilvusClient(uri=uri)
        self.made: set[str] = set()

    def _name(self, collection_id: str) -> str:
        n = collection_id.replace("-", "_")
        return n if n[0].isalpha() or n[0] == "_" else "kb_" + n

    def _ensure(self, collection_id: str, dim: int = 1536) -> str:
        from pymilvus import CollectionSchema, DataType, FieldSchema
        from pymilvus.milvus_client.index import IndexParams

        name = self._name(collection_id)
        if name in self.made:
            return name
        if not self.client.has_collection(collection_name=name):
            fields = [FieldSchema(name="id", dtype=DataType.VARCHAR, is_primary=True, max_length=255),
                      FieldSchema(name="vector", dtype=DataType.FLOAT_VECTOR, dim=dim),
                      FieldSchema(name="text", dtype=DataType.VARCHAR, max_length=65535),
                      FieldSchema(name="file_id", dtype=DataType.VARCHAR, max_length=255),
                      FieldSchema(name="chunk_uuid", dtype=DataType.VARCHAR, max_length=255)]
            self.client.create_collection(collection_name=name, schema=CollectionSchema(fields=fields),
                                          metric_type="COSINE")
            ip = IndexParams()
            ip.add_index(field_name="vector", index_type="AUTOINDEX", metric_type="COSINE")
            self.client.create_index(collection_name=name, index_params=ip)
        self.made.add(name)
        return name

    def _expr(self, filters: dict | None) -> str:
        parts = []
        for key, cond in (filters or {}).items():
            key = {"uuid": "chunk_uuid"}.get(key, key)
            if key not in self.KEPT:
                continue  # the adapter drops it (and $and/$or) with a warning
            op, value = next(iter(cond.items())) if isinstance(cond, dict) else ("$eq", cond)
            lit = (lambda v: json.dumps(v) if isinstance(v, str) else str(v))
            parts.append({"$eq": f"{key} == {lit(value)}", "$ne": f"{key} != {lit(value)}",
                          "$in": f"{key} in [{', '.join(lit(v) for v in value)}]" if op == "$in" else "",
                          "$nin": f"{key} not in [{', '.join(lit(v) for v in value)}]" if op == "$nin" else ""
                          }.get(op, ""))
        return " and ".join(p for p in parts if p)

    async def vector_upsert(self, collection_id, vectors, ids, metadata=None, documents=None) -> None:
        self._enter("vector_upsert", collection_id=collection_id, ids=ids)
        name = self._ensure(collection_id, len(vectors[0]))
        data = [{"id": i, "vector": v, "text": m["text"], "file_id": m["file_id"], "chunk_uuid": m["uuid"]}
                for i, v, m in zip(ids, vectors, metadata or [])]
        await asyncio.to_thread(self.client.insert, collection_name=name, data=data)
        await asyncio.to_thread(self.client.load_collection, collection_name=name)

    async def vector_search(self, collection_id, query_vector, top_k=5, filters=None, search_type="vector",
                            query_text="", vector_weight=None):
        self._enter("vector_search", collection_id=collection_id, filters=filters)
        name = self._ensure(collection_id)
        kwargs: dict[str, Any] = dict(collection_name=name, data=[query_vector], limit=top_k,
                                      search_params={"metric_type": "COSINE", "params": {}},
                                      output_fields=["text", "file_id", "chunk_uuid"])
        expr = self._expr(filters)
        if expr:
            kwargs["filter"] = expr
        res = await asyncio.to_thread(self.client.search, **kwargs)
        return [{"id": h["id"], "distance": h["distance"],
                 "metadata": {"text": h["entity"].get("text"), "file_id": h["entity"].get("file_id"),
                              "uuid": h["entity"].get("chunk_uuid")}} for h in (res[0] if res else [])]

    async def vector_delete(self, collection_id, file_ids=None, filters=None) -> int:
        self._enter("vector_delete", collection_id=collection_id, file_ids=file_ids, filters=filters)
        name = self._ensure(collection_id)
        if file_ids:
            for f in file_ids:  # the host calls delete_by_file_id once per id
                await asyncio.to_thread(self.client.delete, collection_name=name, filter=f"file_id == {json.dumps(f)}")
            return len(file_ids)
        expr = self._expr(filters)
        if expr:
            await asyncio.to_thread(self.client.delete, collection_name=name, filter=expr)
        return 0

    async def vector_list(self, collection_id, filters=None, limit=20, offset=0):
        self._enter("vector_list", collection_id=collection_id, filters=filters, offset=offset)
        name = self._ensure(collection_id)
        kwargs: dict[str, Any] = dict(collection_name=name, output_fields=["text", "file_id", "chunk_uuid"],
                                      limit=limit, offset=offset)
        expr = self._expr(filters)
        if expr:
            kwargs["filter"] = expr
        rows = await asyncio.to_thread(self.client.query, **kwargs)
        return {"items": [{"id": r["id"], "document": r.get("text"),
                           "metadata": {"text": r.get("text"), "file_id": r.get("file_id"),
                                        "uuid": r.get("chunk_uuid")}} for r in rows], "total": -1}

    def count(self, collection_id: str) -> int:
        name = self._name(collection_id)
        if not self.client.has_collection(collection_name=name):
            return 0
        return int(self.client.query(collection_name=name, output_fields=["count(*)"])[0]["count(*)"])


async def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = tempfile.mkdtemp(prefix="lucidrag-scale-")
    if args.backend == "milvus":
        host: TimedHost = MilvusLiteHost(os.path.join(tmp, "milvus.db"))
        count = lambda: host.count(KB)  # noqa: E731
    else:
        host = TimedHost()
        count = lambda: host.vector_count(KB)  # noqa: E731
    h = Harness(host)
    settings = {"chunking": "fixed", "chunk_size": 200, "chunk_overlap": 0}
    tracemalloc.start()
    TimedHost.host_time = 0.0
    t0 = time.perf_counter()
    sem = asyncio.Semaphore(args.concurrency)  # the host runs at most 8 ingestions at once

    async def one(i: int) -> int:
        async with sem:
            r = await h.ingest(KB, f"doc{i}.txt", document(i, args.chunks), settings=settings)
            assert r.status.value == "completed", r.error_message
            return r.chunks_created or 0

    chunks = 0
    for start in range(0, args.docs, 500):
        chunks += sum(await asyncio.gather(*(one(i) for i in range(start, min(args.docs, start + 500)))))
        print(f"  ingested {min(args.docs, start + 500)} docs, {chunks} chunks, "
              f"{time.perf_counter() - t0:.0f}s", flush=True)
    ingest_s = time.perf_counter() - t0
    ingest_host_s = TimedHost.host_time
    calls_ingest = dict(host.calls)
    stored = count()

    latencies, engine_ms = [], []
    queries = [f"part P{(i * 37) % args.docs}-{i % args.chunks} {WORDS[i % len(WORDS)]} rated" for i in range(args.queries)]
    await h.retrieve(KB, "warm up: loads the KB state")
    for q in queries:
        TimedHost.host_time = 0.0
        t = time.perf_counter()
        await h.retrieve(KB, q, settings={"top_k": 5})
        wall = time.perf_counter() - t
        latencies.append(wall * 1000)
        engine_ms.append((wall - TimedHost.host_time) * 1000)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    before = dict(host.calls)
    t = time.perf_counter()
    await h.component.on_knowledge_base_delete(KB)
    hook_s = time.perf_counter() - t
    inst = host.engine.installation("dedicated")
    if inst.background:
        await asyncio.gather(*inst.background.values())
    total_delete_s = time.perf_counter() - t
    delete_calls = {k: v - before.get(k, 0) for k, v in host.calls.items() if v - before.get(k, 0)}
    left = count()
    return {
        "backend": args.backend, "docs": args.docs, "chunks": chunks, "stored": stored,
        "ingest_s": round(ingest_s, 1), "chunks_per_s": round(chunks / ingest_s),
        "ingest_host_s": round(ingest_host_s, 1),
        "host_calls_ingest": calls_ingest,
        "tracemalloc_peak_mb": round(peak / 2**20), "ru_maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "retrieve_ms_median": round(statistics.median(latencies), 1),
        "engine_ms_median": round(statistics.median(engine_ms), 1),
        "engine_ms_p95": round(sorted(engine_ms)[int(len(engine_ms) * 0.95) - 1], 1),
        "kb_delete_hook_s": round(hook_s, 2), "kb_delete_total_s": round(total_delete_s, 2),
        "kb_delete_calls": delete_calls, "vectors_left": left,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=("fake", "milvus"), default="fake")
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--chunks", type=int, default=27, help="paragraphs per document (27 -> 20 chunks of <= 200 chars)")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=1))
    return 0 if result["vectors_left"] == 0 and result["stored"] == result["chunks"] else 1


if __name__ == "__main__":
    sys.exit(main())
