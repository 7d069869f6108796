"""Memory and event-loop stalls of one big ingest: a 20,000-chunk file, 1,536-dimension vectors.

    nice -n 10 /work/venv/bin/python bench/bench_ingest_memory.py [chunks]

Runs the real component on a fake host that embeds cheaply (one random unit vector per text,
1,536 dimensions, like OpenAI's text-embedding-3-small) and keeps nothing it is sent, so that what
is measured is the plugin's own memory: the tracemalloc peak of the ingest (a second pass, as
tracemalloc slows Python down) and the longest event-loop stall (LoopStallMonitor, first pass).
"""

from __future__ import annotations

import random
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lucidrag.base.blocking import run_blocking  # noqa: E402
from tests.conftest import FakePlugin, Harness, runtime_loop  # noqa: E402
from tests.fakes import LoopStallMonitor  # noqa: E402

KB = "bench-memory"
DIM = 1536


class CheapHost(FakePlugin):
    """Embeds with a fixed pool of random vectors and drops upserted vectors (counts them)."""

    def __init__(self) -> None:
        super().__init__()
        rng = random.Random(7)
        self.pool = [[rng.gauss(0.0, 1.0) for _ in range(DIM)] for _ in range(64)]
        self.upserted = 0

    async def invoke_embedding(self, embedding_model_uuid: str, texts: list[str]) -> list[list[float]]:
        await self._call("invoke_embedding", embedding_model_uuid=embedding_model_uuid)
        return [self.pool[hash(t) % len(self.pool)] for t in texts]

    async def vector_upsert(self, collection_id: str, vectors: list[list[float]], ids: list[str],
                            metadata: list[dict[str, Any]] | None = None, documents: list[str] | None = None) -> None:
        await self._call("vector_upsert", collection_id=collection_id)
        assert len(vectors) == len(ids) and all(len(v) == DIM for v in vectors)
        self.upserted += len(vectors)

    async def vector_search(self, collection_id: str, query_vector: list[float], top_k: int = 5,
                            filters: dict[str, Any] | None = None, **_: Any) -> list[dict[str, Any]]:
        await self._call("vector_search", collection_id=collection_id)
        return []


def document(chunks: int) -> bytes:
    # one paragraph per chunk (chunk_size 64 characters, no overlap: two never fit in one)
    return "\n\n".join(f"Record {i}: PX-{i} ships from warehouse {i % 9}." for i in range(chunks)).encode()


async def one_ingest(chunks: int, data: bytes, trace: bool) -> dict[str, float]:
    host = CheapHost()
    harness = Harness(host)
    settings = {"chunk_size": 64, "chunk_overlap": 0}
    await harness.ingest(KB, "warmup.txt", b"warm up the parsers", settings=settings)
    await run_blocking(lambda: None)
    if trace:
        tracemalloc.start()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    async with LoopStallMonitor() as monitor:
        result = await harness.ingest(KB, "big.txt", data, settings=settings)
    elapsed = time.perf_counter() - start
    out = {"chunks": float(result.chunks_created), "upserted": float(host.upserted), "seconds": elapsed,
           "stall_ms": monitor.longest * 1000}
    if trace:
        out["peak_mib"] = (tracemalloc.get_traced_memory()[1] - base) / 2**20
        tracemalloc.stop()
    assert result.chunks_created >= chunks, result
    return out


def main() -> None:
    chunks = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    data = document(chunks)
    loop = runtime_loop()
    plain = loop.run_until_complete(one_ingest(chunks, data, trace=False))
    traced = loop.run_until_complete(one_ingest(chunks, data, trace=True))
    loop.close()
    print("| chunks | wall s | longest loop stall | tracemalloc peak |")
    print("|---|---|---|---|")
    print(f"| {int(plain['chunks'])} | {plain['seconds']:.1f} | {plain['stall_ms']:.0f} ms | {traced['peak_mib']:.0f} MiB |")


if __name__ == "__main__":
    main()
