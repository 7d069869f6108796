"""Event-loop stalls and storage traffic of a KB's life after a restart.

    .venv/bin/python bench/bench_runtime.py [--chunks 20000]

Ingests files totalling ~N chunks into the fake host (tests/fakes.py), starts a new plugin process
over the same host (a restart), then measures, with a ticker task that notes the longest gap
between its 5 ms ticks, the longest event-loop stall during: the first keyword query (loads and
indexes the KB), a file deletion, and a bulk upload of 50 files into the KB before its first query
(with the storage keys each upload transferred). Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import FakePlugin, Harness  # noqa: E402
from tests.fakes import LoopStallMonitor  # noqa: E402

KB = "bench-runtime"
SETTINGS = {"chunk_size": 256, "chunk_overlap": 0}


def document(n: int, chunks: int) -> bytes:
    return "\n\n".join(
        f"File {n} section {i}: assembly AX-{n}-{i} uses bolt size M{i % 12 + 3} and torque {i * 7 % 90} Nm; "
        "inspect the seal and the bearing before every shift and log the reading in the maintenance book."
        for i in range(chunks)
    ).encode()


async def main(total_chunks: int) -> None:
    host = FakePlugin()
    first = Harness(host)
    per_file = 200
    files = max(1, total_chunks // per_file)
    ids = []
    for n in range(files):
        ids.append((await first.ingest(KB, f"f{n}.txt", document(n, per_file), settings=SETTINGS)).document_id)
    chunks = host.vector_count(KB)
    print(f"KB: {files} files, {chunks} chunks")

    back = Harness(FakePlugin())
    back.host.collections, back.host.dims, back.host.storage = host.collections, host.dims, host.storage
    # The fake vector DB lives in this process (millions of float objects); the real one does not.
    # Keep the garbage collector from walking it, or its pauses would be counted as our stalls.
    gc.collect()
    gc.freeze()
    async with LoopStallMonitor() as meter:
        t0 = time.perf_counter()
        await back.texts(KB, "assembly AX-3-17 torque", settings={"search_mode": "keyword"})
        took = time.perf_counter() - t0
    print(f"first keyword query after a restart: {took:.2f} s, longest loop stall {meter.longest * 1000:.0f} ms")
    async with LoopStallMonitor() as meter:
        await back.component.delete_document(KB, ids[0])
    print(f"delete one file: longest loop stall {meter.longest * 1000:.0f} ms")

    bulk = Harness(FakePlugin())
    bulk.host.collections, bulk.host.dims, bulk.host.storage = host.collections, host.dims, host.storage
    listed_before = bulk.host.calls["get_plugin_storage_keys"]
    keys_before = 0
    real = bulk.host.get_plugin_storage_keys

    async def counting():
        nonlocal keys_before
        keys = await real()
        keys_before += len(keys)
        return keys

    bulk.host.get_plugin_storage_keys = counting  # type: ignore[method-assign]
    async with LoopStallMonitor() as meter:
        for n in range(50):
            await bulk.ingest(KB, f"bulk{n}.txt", document(10_000 + n, 5), settings=SETTINGS)
    listings = bulk.host.calls["get_plugin_storage_keys"] - listed_before
    print(f"50 uploads before the first query: {listings} storage listings, {keys_before} keys transferred, "
          f"longest loop stall {meter.longest * 1000:.0f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=20_000)
    asyncio.run(main(parser.parse_args().chunks))
