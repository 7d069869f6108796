#!/usr/bin/env python3
"""The scale benchmark: one knowledge base of up to 1,000,000 chunks (50,000 files x 20
chunks), driven through the plugin's real hooks (the component's ingest / retrieve /
delete_document / on_knowledge_base_delete, inside the SDK's invocation and blocking-work scopes,
exactly as tests/conftest.Harness does), on the fake host or on Milvus Lite.

    PY=/work/wt/.venv-scale/bin/python    # numpy (+ pymilvus, milvus-lite for --backend milvus); Linux (/proc)
    $PY bench/bench_scale.py                                     # small default: 2,000 chunks, fake host
    nice $PY bench/bench_scale.py --sizes 10000,100000 --state-dir ~/.cache/lucidrag-scale/bench --reuse
    nice $PY bench/bench_scale.py --sizes 10000,100000,1000000 --state-dir ... --reuse --backend milvus

Per size it BUILDS the state (ingest through the hooks; sizes are built one after the other in one
process, each continuing the last; the files are bench/lib/scale_corpus.py's, as Markdown with one
heading per chunk so each file is exactly 20 chunks) and saves a snapshot of the host state
(plugin storage + vector DB) under --state-dir/<backend>-<size>; --reuse skips the build when the
snapshot is there and was built by the same plugin code. Then it MEASURES in a fresh process (a plugin restart over that host state;
RSS is that process's): first query after the restart, keyword and hybrid queries, deleting files,
deleting the KB. It prints every row of the scale target table, and how each grows from size to
size (docs/BENCHMARKS.md, "Engine latency", says what each row means).

Host call latency during the measurement (`--call-latency-ms`, default 1 ms per call) stands for
LangBot's IPC round trip; the embedding provider during the ingest sample is modelled as
`--embed-latency-ms` per call + `--embed-per-text-ms` per text (defaults 150 + 1 ms: a hosted
OpenAI-compatible model with the engine's 32-text batches). Both are stated in the output.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.lib.scale_corpus import CHUNKS_PER_FILE, generate_file, make_queries  # noqa: E402
from bench.lib.scale_host import SNAPSHOT_FORMAT, ScaleHostBase, make_host  # noqa: E402

from tests.conftest import MODEL, Harness, runtime_loop  # noqa: E402
from tests.fakes import LoopStallMonitor, ingestion_context  # noqa: E402

KB = "kb-scale-0000"
BYSTANDER = "kb-bystander"  # another KB of the installation: its requests are the "next invocations"
CREATION = {"embedding_model_uuid": MODEL, "chunking": "structure", "chunk_size": 512, "chunk_overlap": 0}
TARGETS = {
    "rss": "≤ 1.5 GB at 1M", "first_query": "≤ 3 s at 100k / ≤ 30 s at 1M", "stall": "≤ 100 ms",
    "keyword_p95": "≤ 50 ms at 1M", "hybrid_p95": "≤ 100 ms at 1M", "ingest_share": "≤ 10 %",
    "writes": "≤ 2 × at 100k", "delete_file": "O(chunks of the file)", "delete_kb": "complete, in slices, nothing left",
}
TRUST_SNAPSHOTS = False  # --trust-snapshots
_NS = uuid.UUID("6f1c2b1e-12a0-4c59-9a51-000000000012")


def document_id(n: int) -> str:
    return str(uuid.uuid5(_NS, f"file-{n}"))


def markdown_file(n: int) -> bytes:
    """scale_corpus file n: one `##` section per chunk (sections are never merged, each fits)."""
    return "\n\n".join(f"## Part {n}-{j}\n\n{text}" for j, (_, text) in enumerate(generate_file(n))).encode()


def plugin_source() -> str:
    """A hash of the plugin's code: a snapshot is reused only by the code that built it (the
    storage layout is the plugin's own)."""
    digest = hashlib.sha256()
    for path in sorted([*ROOT.glob("lucidrag/**/*.py"), *ROOT.glob("components/**/*.py")]):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def snapshot_ok(directory: Path) -> bool:
    try:
        info = json.loads((directory / "info.json").read_text())
    except (OSError, ValueError):
        return False
    if info.get("snapshot_format") != SNAPSHOT_FORMAT:
        print(f"build: {directory.name} is an older snapshot format; building it again", flush=True)
        return False
    if info.get("plugin_source") != plugin_source():
        if TRUST_SNAPSHOTS:
            print(f"build: {directory.name} was built by other plugin code; reused anyway (--trust-snapshots: "
                  "valid only while the storage layout and the tokeniser are unchanged)", flush=True)
            return True
        print(f"build: {directory.name} was built by other plugin code; building it again", flush=True)
        return False
    return True


def mib(b: float) -> float:
    return round(b / 2**20, 1)


def p95(values: list[float]) -> float:
    s = sorted(values)
    return s[max(0, int(round(0.95 * len(s))) - 1)] if s else float("nan")


def delta(after: Counter, before: Counter) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in sorted(after.items()) if v - before.get(k, 0)}


async def ingest(h: Harness, kb_id: str, n: int) -> int:
    """File n through the component's ingest hook; the upload is gone afterwards, as on LangBot."""
    data = markdown_file(n)
    storage_path = f"v1/{kb_id}/{uuid.uuid4().hex}.md"
    h.host.files[storage_path] = data
    context = ingestion_context(kb_id, storage_path, data, document_id(n), dict(CREATION))
    try:
        result = await h.component.ingest(context)
    finally:
        h.host.files.pop(storage_path, None)
    if result.status.value != "completed":
        raise RuntimeError(f"file {n} did not ingest: {result.error_message}")
    return result.chunks_created or 0


# ====================================================================== build
async def build(args: argparse.Namespace, sizes: list[int]) -> None:
    state_dir: Path = args.state_dir
    ready = {s for s in sizes if args.reuse and snapshot_ok(state_dir / f"{args.backend}-{s}")}
    todo = [s for s in sizes if s not in ready]
    if not todo:
        return
    work = state_dir / f"{args.backend}-work"
    start_from = max((s for s in ready if s < todo[0]), default=0)
    rss = RssPeak(args.rss_limit_mib, "build")
    if work.exists():
        shutil.rmtree(work)
    host = make_host(args.backend, args.dim, work if args.backend == "milvus" else None)
    h = Harness(host)  # type: ignore[arg-type]
    done_files = 0
    earlier: dict[str, dict[str, int]] = {"written": {}, "writes": {}}  # the build's writes before this process
    if start_from:
        host.load(state_dir / f"{args.backend}-{start_from}", work) if args.backend == "milvus" else \
            host.load(state_dir / f"{args.backend}-{start_from}")
        done_files = start_from // CHUNKS_PER_FILE
        earlier = json.loads((state_dir / f"{args.backend}-{start_from}" / "info.json").read_text())["storage"]
        print(f"build: continuing from the {start_from:,}-chunk snapshot (a plugin restart)", flush=True)
    else:
        await h.component.on_knowledge_base_create(KB, dict(CREATION))
        await h.component.on_knowledge_base_create(BYSTANDER, dict(CREATION))
        await ingest(h, BYSTANDER, 10**7)
    for size in todo:
        files = size // CHUNKS_PER_FILE
        sample = min(args.sample_files, max(1, (files - done_files) // 4))
        bulk_end = files - sample
        t0 = time.perf_counter()
        chunks = 0
        sem = asyncio.Semaphore(args.concurrency)  # LangBot runs up to 8 ingestions per workspace

        async def one(n: int) -> int:
            async with sem:
                return await ingest(h, KB, n)
        for start in range(done_files, bulk_end, 1000):
            chunks += sum(await asyncio.gather(*(one(n) for n in range(start, min(bulk_end, start + 1000)))))
            rss.phase = f"the build, at {min(bulk_end, start + 1000) * CHUNKS_PER_FILE:,} chunks"
            el = time.perf_counter() - t0
            print(f"  build {args.backend}: {min(bulk_end, start + 1000):,} files, "
                  f"{chunks:,} chunks this stage, {el:.0f} s ({chunks / max(el, 1e-9):,.0f} chunks/s)", flush=True)
        bulk_s = time.perf_counter() - t0
        bulk_chunks = chunks
        # The ingest sample: one file at a time, so wall = plugin time + time inside host calls.
        host.embed_latency_s, host.embed_per_text_s = args.embed_latency_ms / 1000, args.embed_per_text_ms / 1000
        host.latency = args.call_latency_ms / 1000
        walls, hosts, sample_chunks = [], [], 0
        calls0 = Counter(host.calls)
        for n in range(bulk_end, files):
            h0 = host.host_s
            t = time.perf_counter()
            sample_chunks += await ingest(h, KB, n)
            walls.append(time.perf_counter() - t)
            hosts.append(host.host_s - h0)
        host.embed_latency_s = host.embed_per_text_s = host.latency = 0.0
        sample_calls = delta(host.calls, calls0)
        done_files = files
        stored = host.count(KB)
        out = state_dir / f"{args.backend}-{size}"
        if out.exists():
            shutil.rmtree(out)
        host.save(out)
        storage = host.storage_accounting(KB)
        for what in ("written", "writes"):
            storage[what] = dict(Counter(storage[what]) + Counter(earlier[what]))
        info = {
            "storage": storage, "plugin_source": plugin_source(), "snapshot_format": SNAPSHOT_FORMAT, "build_rss_mib": mib(rss.now()),
            "backend": args.backend, "size": size, "files": files, "dim": args.dim, "stored_vectors": stored,
            "bulk": {"chunks": bulk_chunks, "s": round(bulk_s, 1), "concurrency": args.concurrency},
            "sample": {"files": len(walls), "chunks": sample_chunks, "wall_s": sum(walls), "host_s": sum(hosts),
                       "host_calls": sample_calls,
                       "model": f"embedding {args.embed_latency_ms:g} ms/call + {args.embed_per_text_ms:g} ms/text, "
                                f"other host calls {args.call_latency_ms:g} ms"},
        }
        (out / "info.json").write_text(json.dumps(info, indent=1))
        print(f"build: saved {size:,} chunks ({stored:,} vectors) to {out}", flush=True)
    rss.stop()
    if args.backend == "milvus":
        host.close()  # type: ignore[attr-defined]
    shutil.rmtree(work, ignore_errors=True)


# ====================================================================== measure (a fresh process)
class RssPeak:
    """Samples this process' RSS in a thread; `peak` since the last reset. Past `limit_mib` it
    prints an ABORT line naming the phase and ends the process (the machine is shared)."""

    def __init__(self, limit_mib: float, phase: str, every: float = 0.05) -> None:
        self.peak = 0
        self.limit = limit_mib * 2**20
        self.phase = phase
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def now() -> int:
        with open("/proc/self/statm") as f:  # Linux; the second field is resident pages
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def reset(self) -> None:
        self.peak = self.now()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            now = self.now()
            self.peak = max(self.peak, now)
            if now > self.limit:
                print("ABORT " + json.dumps({"phase": self.phase, "rss_mib": mib(now)}), flush=True)
                os._exit(3)

    def stop(self) -> None:
        self._stop.set()


async def timed_retrieve(h: Harness, host: ScaleHostBase, kb_id: str, query: str,
                         settings: dict[str, Any]) -> tuple[float, float, int]:
    h0 = host.host_s
    t = time.perf_counter()
    response = await h.retrieve(kb_id, query, settings=settings)
    wall = time.perf_counter() - t
    return wall, wall - (host.host_s - h0), len(response.results)


async def measure(directory: Path, args: argparse.Namespace) -> dict[str, Any]:
    info = json.loads((directory / "info.json").read_text())
    size, files = info["size"], info["files"]
    rss = RssPeak(args.rss_limit_mib, "loading the host state")
    gc.collect()
    rss_bare = rss.now()
    host = make_host(info["backend"], info["dim"])
    work = Path(tempfile.mkdtemp(prefix="lucidrag-scale-measure-"))
    if info["backend"] == "milvus":
        host.load(directory, work)  # type: ignore[call-arg]
    else:
        host.load(directory)
    host.count(KB)
    gc.collect()
    # The host's state (1M metadata dicts at 1M chunks) lives in LangBot's process, not the
    # plugin's: keep the garbage collector from walking it, or its gen-2 passes show up as loop
    # stalls of the plugin that the real plugin never has.
    gc.freeze()
    host_rss = rss.now() - rss_bare  # what the fake host's state adds to this process
    host.latency = args.call_latency_ms / 1000
    host.restart_plugin()
    h = Harness(host)  # type: ignore[arg-type]
    queries = [q for _, q in make_queries(size, args.queries)]
    out: dict[str, Any] = {"backend": info["backend"], "chunks": size, "files": files, "vectors": info["stored_vectors"],
                           "host_rss_mib": mib(host_rss), "bare_rss_mib": mib(rss_bare)}
    rss.reset()
    rss.phase = "the first query after the restart"

    # 1. the first query after the restart (default retrieval settings: hybrid, top 5)
    calls0 = Counter(host.calls)
    h0 = host.host_s
    async with LoopStallMonitor() as monitor:
        t, cpu = time.perf_counter(), time.process_time()
        response = await h.retrieve(KB, queries[0])
        first_s, cpu = time.perf_counter() - t, time.process_time() - cpu
    out["first_query"] = {"wall_s": round(first_s, 3), "cpu_s": round(cpu, 3),
                          "longest_stall_ms": round(monitor.longest * 1000, 1),
                          "host_s": round(host.host_s - h0, 3), "results": len(response.results),
                          "host_calls": delta(host.calls, calls0)}
    out["rss_after_first_query_mib"] = mib(rss.now() - host_rss)

    # 2. keyword top-10 and 3. hybrid (default) queries, with the loop watched throughout
    longest = 0.0
    rss.phase = "keyword and hybrid queries"
    for mode, settings in (("keyword", {"search_mode": "keyword", "top_k": 10}),
                           ("hybrid", {"search_mode": "hybrid", "top_k": 5})):
        walls, engine, stalls, empty = [], [], [], 0
        for q in queries:
            async with LoopStallMonitor() as monitor:
                wall, own, n = await timed_retrieve(h, host, KB, q, settings)
            walls.append(wall * 1000)
            engine.append(own * 1000)
            stalls.append(monitor.longest * 1000)
            empty += n == 0
        longest = max(longest, max(stalls))
        out[mode] = {"queries": len(queries), "wall_p50_ms": round(statistics.median(walls), 2),
                     "wall_p95_ms": round(p95(walls), 2), "engine_p50_ms": round(statistics.median(engine), 2),
                     "engine_p95_ms": round(p95(engine), 2), "stall_p95_ms": round(p95(stalls), 1),
                     "stall_max_ms": round(max(stalls), 1), "no_result": empty}
    out["query_longest_stall_ms"] = round(longest, 1)
    gc.collect()
    out["rss_mib"] = mib(rss.now() - host_rss)
    out["rss_peak_mib"] = mib(rss.peak - host_rss)

    # 4. deleting single files (spread over the KB)
    rss.phase = "deleting files"
    picks = sorted({(files * k) // (args.delete_files + 1) for k in range(1, args.delete_files + 1)})
    deletes = []
    for n in picks:
        fid = document_id(n)
        calls0 = Counter(host.calls)
        h0 = host.host_s
        async with LoopStallMonitor() as monitor:
            t = time.perf_counter()
            ok = await h.component.delete_document(KB, fid)
            wall = time.perf_counter() - t
        deletes.append({"ok": ok, "wall_ms": round(wall * 1000, 1), "engine_ms": round((wall - host.host_s + h0) * 1000, 1),
                        "stall_ms": round(monitor.longest * 1000, 1), "host_calls": delta(host.calls, calls0),
                        "vectors_left": host.count(KB, fid), "keys_left": len(host.kb_storage_keys(fid))})
    out["delete_file"] = {
        "files": len(deletes), "all_ok": all(d["ok"] for d in deletes),
        "wall_ms_median": statistics.median(d["wall_ms"] for d in deletes),
        "engine_ms_median": statistics.median(d["engine_ms"] for d in deletes),
        "longest_stall_ms": max(d["stall_ms"] for d in deletes),
        "host_calls_each": deletes[0]["host_calls"],
        "host_calls_max": max(sum(d["host_calls"].values()) for d in deletes),
        "left": sum(d["vectors_left"] + d["keys_left"] for d in deletes),
    }

    # 5. deleting the whole KB: the hook, then the installation's next requests (retrieves on
    # another KB) until the vector DB and plugin storage hold nothing of it.
    rss.phase = "deleting the KB"
    calls0 = Counter(host.calls)
    t = time.perf_counter()
    async with LoopStallMonitor() as monitor:
        await h.component.on_knowledge_base_delete(KB)
        hook_s = time.perf_counter() - t
        after_hook = (host.count(KB), len(host.kb_storage_keys(KB)))
        if not args.kb_row_kept:
            host.deleted_kbs.add(KB)  # what LangBot 4.11.2 does once the hook returned
        invocations, stuck, left = 1, 0, after_hook
        while any(left) and invocations < args.max_invocations and stuck < args.stuck_invocations:
            await h.retrieve(BYSTANDER, "pump valve pressure")
            invocations += 1
            now = (host.count(KB), len(host.kb_storage_keys(KB)))
            stuck = stuck + 1 if now == left else 0
            left = now
    out["delete_kb"] = {
        "hook_s": round(hook_s, 2), "total_s": round(time.perf_counter() - t, 2), "invocations": invocations,
        "longest_stall_ms": round(monitor.longest * 1000, 1), "host_calls": delta(host.calls, calls0),
        "left_after_hook": {"vectors": after_hook[0], "keys": after_hook[1]},
        "kb_row_kept": args.kb_row_kept, "vectors_left": left[0], "keys_left": left[1],
    }
    out["ingest"] = ingest_row(info)
    out["storage"] = info["storage"]
    out["call_latency_ms"] = args.call_latency_ms
    rss.stop()
    if info["backend"] == "milvus":
        host.close()  # type: ignore[attr-defined]
    shutil.rmtree(work, ignore_errors=True)
    return out


def ingest_row(info: dict[str, Any]) -> dict[str, Any]:
    s = info["sample"]
    plugin_s = s["wall_s"] - s["host_s"]
    return {"bulk_chunks_per_s": round(info["bulk"]["chunks"] / max(info["bulk"]["s"], 1e-9)),
            "bulk_concurrency": info["bulk"]["concurrency"],
            "sample_files": s["files"], "plugin_ms_per_file": round(plugin_s / max(s["files"], 1) * 1000, 1),
            "host_ms_per_file": round(s["host_s"] / max(s["files"], 1) * 1000, 1),
            "plugin_share_pct": round(100 * plugin_s / max(s["wall_s"], 1e-9), 1), "model": s["model"],
            "host_calls_per_file": {k: round(v / max(s["files"], 1), 2) for k, v in s["host_calls"].items()}}


# ====================================================================== report
def storage_row(storage: dict[str, dict[str, int]]) -> str:
    written, stored = sum(storage["written"].values()), sum(storage["stored"].values())
    return (f"{written / max(stored, 1):.2f} × ({mib(written):,} MiB in {sum(storage['writes'].values()):,} writes / "
            f"{mib(stored):,} MiB in {sum(storage['keys'].values()):,} keys, of which segments "
            f"{mib(storage['stored'].get('segments', 0)):,} MiB, records {mib(storage['stored'].get('records', 0)):,} MiB)")


ROW_NAMES = ("plugin RSS (steady / peak)", "first query after a restart", "  longest loop stall during it",
             "keyword top-10 p95 (wall)", "hybrid retrieve, engine-added p95", "  longest loop stall over all queries",
             "ingest: plugin's share of wall", "plugin storage written over the build / stored",
             "  written by kind (records / journal / segments / manifest)", "delete one file", "delete the KB")


def rows(r: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(row, target, value) for the scale target table."""
    if "aborted" in r:
        a = r["aborted"]
        return [(name, "", f"aborted: RSS {a['rss_mib']:,.0f} MiB during {a['phase']}" if i == 0 else "—")
                for i, name in enumerate(ROW_NAMES)]
    fq, kw, hy, df, dk, ing = r["first_query"], r["keyword"], r["hybrid"], r["delete_file"], r["delete_kb"], r["ingest"]
    reads = fq["host_calls"].get("get_plugin_storage", 0)
    return [
        ("plugin RSS (steady / peak)", TARGETS["rss"], f"{r['rss_mib']:,.0f} / {r['rss_peak_mib']:,.0f} MiB"),
        ("first query after a restart", TARGETS["first_query"],
         f"{fq['wall_s']:.2f} s (CPU {fq.get('cpu_s', float('nan')):.2f} s), "
         f"{sum(fq['host_calls'].values()):,} host calls ({reads:,} storage reads)"),
        ("  longest loop stall during it", TARGETS["stall"], f"{fq['longest_stall_ms']:.0f} ms"),
        ("keyword top-10 p95 (wall)", TARGETS["keyword_p95"],
         f"{kw['wall_p95_ms']:.1f} ms (p50 {kw['wall_p50_ms']:.1f})"),
        ("hybrid retrieve, engine-added p95", TARGETS["hybrid_p95"],
         f"{hy['engine_p95_ms']:.1f} ms (p50 {hy['engine_p50_ms']:.1f}; wall p95 {hy['wall_p95_ms']:.1f})"),
        ("  longest loop stall over all queries", TARGETS["stall"], f"{r['query_longest_stall_ms']:.0f} ms"),
        ("ingest: plugin's share of wall", TARGETS["ingest_share"],
         f"{ing['plugin_share_pct']:.1f} % ({ing['plugin_ms_per_file']:.0f} ms plugin / "
         f"{ing['host_ms_per_file']:.0f} ms host per 20-chunk file)"),
        ("plugin storage written over the build / stored", TARGETS["writes"], storage_row(r["storage"])),
        ("  written by kind (records / journal / segments / manifest)", "",
         " / ".join(f"{mib(r['storage']['written'].get(k, 0)):,} MiB ({r['storage']['writes'].get(k, 0):,})"
                    for k in ("records", "journal", "segments", "manifest"))),
        ("delete one file", TARGETS["delete_file"],
         f"{df['wall_ms_median']:.0f} ms median ({df['engine_ms_median']:.0f} ms engine), "
         f"{sum(df['host_calls_each'].values())} host calls, stall {df['longest_stall_ms']:.0f} ms, left {df['left']}"),
        ("delete the KB", TARGETS["delete_kb"],
         f"{dk['invocations']} invocations, {dk['total_s']:.1f} s (hook {dk['hook_s']:.1f} s, then left "
         f"{dk['left_after_hook']['vectors']:,} vectors / {dk['left_after_hook']['keys']:,} keys), "
         f"{sum(dk['host_calls'].values()):,} host calls, left {dk['vectors_left']:,} vectors / {dk['keys_left']:,} keys"),
    ]


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    by_size = sorted(results, key=lambda r: r["chunks"])
    done = [r for r in by_size if "aborted" not in r]
    head = ["row", "target"] + [f"{r['chunks']:,}" for r in by_size]
    table = [rows(r) for r in by_size]
    model = done[0]["ingest"]["model"] if done else "—"
    lines = [f"backend: {by_size[0]['backend']}; host call latency {args.call_latency_ms:g} ms; "
             f"ingest sample: {model}; after the KB delete hook, vector calls for the KB "
             + ("still work (--kb-row-kept)" if args.kb_row_kept else "are refused, as LangBot 4.11.2 deletes its row"),
             "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, name in enumerate(ROW_NAMES):
        target = next((t[i][1] for t in table if t[i][1]), "")
        lines.append("| " + " | ".join([name, target] + [t[i][2] for t in table]) + " |")
    if len(done) > 1:
        lines += ["", "growth (each size over the one before):"]
        pairs = list(zip(done, done[1:]))
        metrics = [("plugin RSS", lambda r: r["rss_mib"]),
                   ("first query wall", lambda r: r["first_query"]["wall_s"]),
                   ("first query stall", lambda r: r["first_query"]["longest_stall_ms"]),
                   ("keyword p95", lambda r: r["keyword"]["wall_p95_ms"]),
                   ("hybrid engine p95", lambda r: r["hybrid"]["engine_p95_ms"]),
                   ("ingest plugin ms/file", lambda r: r["ingest"]["plugin_ms_per_file"]),
                   ("plugin storage written", lambda r: sum(r["storage"]["written"].values())),
                   ("plugin storage stored", lambda r: sum(r["storage"]["stored"].values())),
                   ("delete file wall", lambda r: r["delete_file"]["wall_ms_median"]),
                   ("delete file host calls", lambda r: sum(r["delete_file"]["host_calls_each"].values())),
                   ("delete KB invocations", lambda r: r["delete_kb"]["invocations"]),
                   ("delete KB wall", lambda r: r["delete_kb"]["total_s"])]
        for name, get in metrics:
            steps = ", ".join(f"{b['chunks'] // a['chunks']}x chunks → {get(b) / get(a):.1f}x" if get(a) else
                              f"{b['chunks'] // a['chunks']}x chunks → n/a" for a, b in pairs)
            lines.append(f"- {name}: {steps}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=("fake", "milvus"), default="fake")
    ap.add_argument("--sizes", "--chunks", default="2000",
                    help="comma-separated KB sizes in chunks (multiples of 20), e.g. 10000,100000,1000000")
    ap.add_argument("--state-dir", type=Path, default=None,
                    help="where snapshots of the built host state go (default: a temp dir, deleted)")
    ap.add_argument("--reuse", action="store_true", help="skip building a size whose snapshot exists")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--trust-snapshots", action="store_true",
                    help="with --reuse: reuse a snapshot built by other plugin code (same storage layout only)")
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--sample-files", type=int, default=50, help="files of the sequential ingest sample")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--delete-files", type=int, default=5)
    ap.add_argument("--max-invocations", type=int, default=5000)
    ap.add_argument("--stuck-invocations", type=int, default=30,
                    help="stop the KB deletion after this many invocations that removed nothing")
    ap.add_argument("--kb-row-kept", action="store_true",
                    help="let vector calls for the deleted KB keep working after its delete hook "
                         "(LangBot 4.11.2 deletes the KB row then, and refuses them)")
    ap.add_argument("--call-latency-ms", type=float, default=1.0)
    ap.add_argument("--embed-latency-ms", type=float, default=150.0)
    ap.add_argument("--embed-per-text-ms", type=float, default=1.0)
    ap.add_argument("--rss-limit-mib", type=float, default=8000,
                    help="end a build or measurement whose RSS passes this (reported as aborted)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--measure", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    global TRUST_SNAPSHOTS
    TRUST_SNAPSHOTS = args.trust_snapshots

    if args.measure is not None:  # the child process: one restart over one snapshot
        loop = runtime_loop()
        result = loop.run_until_complete(measure(args.measure, args))
        loop.close()
        print("RESULT " + json.dumps(result), flush=True)
        return 0

    sizes = sorted(int(s) for s in args.sizes.split(","))
    if any(s % CHUNKS_PER_FILE or s <= 0 for s in sizes):
        ap.error(f"sizes must be positive multiples of {CHUNKS_PER_FILE}")
    temporary = args.state_dir is None
    args.state_dir = Path(tempfile.mkdtemp(prefix="lucidrag-scale-")) if temporary else args.state_dir.expanduser()
    args.state_dir.mkdir(parents=True, exist_ok=True)
    try:
        loop = runtime_loop()
        loop.run_until_complete(build(args, sizes))
        loop.close()
        if args.build_only:
            return 0
        results = []
        for size in sizes:
            cmd = [sys.executable, __file__, "--measure", str(args.state_dir / f"{args.backend}-{size}"),
                   "--queries", str(args.queries), "--delete-files", str(args.delete_files),
                   "--max-invocations", str(args.max_invocations), "--call-latency-ms", str(args.call_latency_ms),
                   "--rss-limit-mib", str(args.rss_limit_mib), "--stuck-invocations", str(args.stuck_invocations)]
            cmd += ["--kb-row-kept"] if args.kb_row_kept else []
            print(f"measure: {args.backend} {size:,} chunks (fresh process = plugin restart)", flush=True)
            proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            aborted = [ln for ln in proc.stdout.splitlines() if ln.startswith("ABORT ")]
            if aborted:
                results.append({"backend": args.backend, "chunks": size, "aborted": json.loads(aborted[-1][6:])})
                print(json.dumps(results[-1]), flush=True)
                continue
            if proc.returncode or not lines:
                sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-5000:])
                return 1
            results.append(json.loads(lines[-1][len("RESULT "):]))
            print(json.dumps(results[-1]), flush=True)
        text = report(results, args)
        print()
        print(text)
        if args.json:
            args.json.write_text(json.dumps({"results": results, "report": text}, indent=1))
        bad = [r for r in results if "aborted" in r or r["delete_kb"]["vectors_left"] or r["delete_kb"]["keys_left"]
               or r["delete_file"]["left"] or not r["delete_file"]["all_ok"]]
        return 1 if bad else 0
    finally:
        if temporary:
            shutil.rmtree(args.state_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
