#!/usr/bin/env python3
"""Provider and upload numbers on the harsh fake host (tests/conftest.py: the SDK's
bounded executor, blocking_work_scope, invocation binding, host calls that yield).

    /work/main/.venv/bin/python bench/bench_providers.py [--uploads 8] [--kib 1024] [--kb 400]

Prints, per scenario: concurrent uploads completed and the longest event-loop stall while they
ran (restart and bulk-upload stalls: bench/bench_runtime.py); embedding calls for one file after
a 503 burst; the vector-mode score of a relevant passage with unit and x8 vectors; bytes the
vector cache holds per 1,536-dim vector and entries that fit in its bound. Runs against whatever
`lucidrag` sits next to it, so the same script measures the old code when copied into an old
checkout.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import lucidrag.base.host as host_module  # noqa: E402
import lucidrag.vectors.embedding as embedding  # noqa: E402
from tests.conftest import MODEL, FakePlugin, Harness, runtime_loop  # noqa: E402
from tests.fakes import LoopStallMonitor  # noqa: E402
from tests.test_engine import SOLAR, TEA  # noqa: E402

KB = "kb-bench"
BURST = 6  # failed embedding calls in a row, as LangBot 4.11 reports a 503 ("API error")


def text_file(tag: str, kib: int) -> bytes:
    paragraph = (f"Section {{i}}. Unit {tag} part PX-{{i}} weighs {{w}} grams and ships from warehouse {{h}}. "
                 + "It is described at length so that every chunk has real content. " * 4)
    out, size, i = [], 0, 0
    while size < kib * 1024:
        out.append(paragraph.format(i=i, w=i * 7, h=i % 9))
        size += len(out[-1]) + 2
        i += 1
    return "\n\n".join(out).encode()


async def concurrent_uploads(n: int, kib: int) -> None:
    harness = Harness(FakePlugin())
    files = [text_file(str(i), kib) for i in range(n)]
    t0 = time.perf_counter()
    async with LoopStallMonitor() as monitor:
        results = await asyncio.gather(*(harness.ingest(KB, f"u{i}.txt", f) for i, f in enumerate(files)))
    done = sum(r.status.value == "completed" for r in results)
    errors = {r.error_message[:90] for r in results if r.error_message}
    print(f"uploads: {done}/{n} files of {kib} KiB completed in {time.perf_counter() - t0:.1f} s; "
          f"longest loop stall {monitor.longest * 1000:.0f} ms (the fake host's own work runs on this "
          f"loop too); errors: {sorted(errors) or 'none'}")


async def burst_then_file(kib: int) -> None:
    harness = Harness(FakePlugin())
    harness.host.burst("invoke_embedding", BURST, "503")
    first = await harness.ingest(KB, "during-burst.txt", text_file("a", 64))
    before = harness.host.calls["invoke_embedding"]
    after = await harness.ingest(KB, "after-burst.txt", text_file("b", kib))
    chunks = len(harness.host.vectors_of(KB, after.document_id))
    print(f"503 burst ({BURST} calls): file during it {first.status.value}; next file {chunks} chunks took "
          f"{harness.host.calls['invoke_embedding'] - before} embedding calls")


async def scaled_scores() -> None:
    scores = []
    for scale in (1.0, 8.0):
        harness = Harness(FakePlugin(embed_scale=scale))
        await harness.ingest(KB, "tea.txt", TEA)
        await harness.ingest(KB, "solar.txt", SOLAR)
        response = await harness.retrieve(KB, "How many kilowatts does the solar array produce?",
                                          settings={"search_mode": "vector"})
        scores.append(response.results[0].score if response.results else None)
    print(f"vector-mode score of the relevant passage: unit vectors {scores[0]:.3f}, x8 vectors {scores[1]:.3f}")


def cache_bytes() -> None:
    from array import array

    cache = embedding.VectorCache()
    vector = [0.01] * 1536
    if hasattr(cache, "nbytes"):
        per = cache.cost(array("f", vector))
        print(f"vector cache: {per / 1024:.1f} KiB per 1,536-dim vector, bound {cache.max_bytes / 2**20:.0f} MiB "
              f"= {cache.max_bytes // per:,} vectors")
    else:  # list[float] entries, bounded by count
        per = sys.getsizeof(vector) + sum(sys.getsizeof(float(x) + i) for i, x in enumerate(vector))
        print(f"vector cache: {per / 1024:.1f} KiB per 1,536-dim vector, bound {cache.max_entries:,} entries "
              f"= {cache.max_entries * per / 2**30:.1f} GiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uploads", type=int, default=8)
    parser.add_argument("--kib", type=int, default=1024, help="size of each concurrent upload")
    parser.add_argument("--kb", type=int, default=400, help="KiB of the file embedded after the burst")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    host_module.RETRY_DELAYS = (0.0, 0.0, 0.0)
    if embedding.Embedder.__init__.__defaults__:  # an older Embedder took the delays as a parameter
        embedding.Embedder.__init__.__defaults__ = ((0.0, 0.0, 0.0),)
    print(f"model {MODEL}; python {sys.version.split()[0]}")
    for scenario in (concurrent_uploads(args.uploads, args.kib), burst_then_file(args.kb), scaled_scores()):
        loop = runtime_loop()
        try:
            loop.run_until_complete(scenario)
        finally:
            loop.close()
    cache_bytes()


if __name__ == "__main__":
    main()
