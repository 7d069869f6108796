"""Query latency with and without the console's question log.

    .venv/bin/python bench/bench_querylog.py [--queries 400] [--latency-ms 2]

A KB of 30 files on the fake host (tests/fakes.py), every host call taking --latency-ms. Queries
run one at a time through the component's retrieve hook, alternating `query_log` off and on (so
drift hits both alike), and the wall time of each hook is measured, the hook's own end (the
cancelled write beside it) included. Three runs: the log off vs text; off vs text with a write
beside every query (FLUSH_EVERY_S = 0, the worst case); off vs hash. Prints p50 / p95 / p99 and
the p95 difference, then what the log costs the event loop: recording one question, and packing
one full block (the CPU a write beside a query takes). Asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lucidrag.state import querylog  # noqa: E402
from lucidrag.state.querylog import QueryEntry, QueryLog, question_digest  # noqa: E402
from lucidrag.state.querystats import percentile  # noqa: E402
from tests.conftest import FakePlugin, Harness, runtime_loop  # noqa: E402

KB = "bench-querylog"
WORDS = ("pump valve seal bearing torque bolt gasket filter motor belt sensor relay fuse cable "
         "inspect replace tighten clean log shift weekly monthly pressure flow noise heat").split()


def document(n: int, rng: random.Random) -> bytes:
    return "\n\n".join(f"Section {n}.{i}: " + " ".join(rng.choice(WORDS) for _ in range(60))
                       for i in range(12)).encode()


async def measure(harness: Harness, questions: list[str], mode: str) -> dict[str, list[float]]:
    took: dict[str, list[float]] = {"off": [], mode: []}
    for n, question in enumerate(questions):
        setting = "off" if n % 2 == 0 else mode
        started = time.perf_counter()
        await harness.retrieve(KB, question, settings={"query_log": setting})
        took[setting].append((time.perf_counter() - started) * 1000.0)
    return took


def line(name: str, values: list[float]) -> str:
    p50, p95, p99 = (percentile(values, p) for p in (50, 95, 99))
    return f"  {name:<5} n={len(values):<4} p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  p99 {p99:6.2f} ms"


async def main(queries: int, latency_ms: float) -> None:
    rng = random.Random(7)
    host = FakePlugin(latency=latency_ms / 1000.0)
    harness = Harness(host)
    for n in range(30):
        await harness.ingest(KB, f"f{n}.txt", document(n, rng))
    questions = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) + "?" for _ in range(queries)]
    await measure(harness, questions[:40], "text")  # warm-up: caches, the first listing
    print(f"{queries} queries per run, host calls {latency_ms} ms each")
    runs = [("text", "text", querylog.FLUSH_EVERY_S), ("text, a write beside every query", "text", 0.0),
            ("hash", "hash", querylog.FLUSH_EVERY_S)]
    for title, mode, flush_every in runs:
        querylog.FLUSH_EVERY_S = flush_every
        took = await measure(harness, questions, mode)
        off, on = percentile(took["off"], 95), percentile(took[mode], 95)
        print(f"query_log off vs {title}:")
        print(line("off", took["off"]))
        print(line(mode, took[mode]))
        print(f"  p95 difference: {on - off:+.2f} ms")  # type: ignore[operator]
    writes = sum(1 for k in host.storage if "/qlog/" in k)
    print(f"query log blocks in storage: {writes}")
    loop_costs(questions)


def loop_costs(questions: list[str]) -> None:
    files = tuple((f"{n:08d}-aaaa-bbbb-cccc-dddddddddddd", f"Maintenance manual {n}", 0.5) for n in range(5))
    log = QueryLog(KB)
    log.loaded = True
    started = time.perf_counter()
    for n in range(10_000):
        question = questions[n % len(questions)]
        log.record(QueryEntry(time.time(), question, question_digest(KB, question), "hybrid", 20.0, 5, 5, files), 1000)
    per_record = (time.perf_counter() - started) / 10_000 * 1e6
    block = log._blocks[-2]  # a full one
    started = time.perf_counter()
    for _ in range(100):
        packed = querylog._pack(block.encoded)
    per_pack = (time.perf_counter() - started) / 100 * 1000
    print(f"recording one question: {per_record:.1f} µs; packing a full block ({len(block.entries)} questions, "
          f"{block.size // 1024} KiB -> {len(packed) // 1024} KiB): {per_pack:.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, default=2.0)
    args = parser.parse_args()
    loop = runtime_loop()
    loop.run_until_complete(main(args.queries, args.latency_ms))
