"""Can a file's completeness be read from the vector DB alone? Prints, per backend emulation of
tests/fakes.py (Chroma-like; Milvus and pgvector as LangBot 4.11.2's adapters store them: only
`text`, `file_id` and `uuid` of the metadata):

- whether a per-vector `chunks` metadata key (the file's chunk count) survives a listing;
- for ingests cut after k of their B upsert batches (the rollback failing too), whether the rule
  "a file is complete iff its chunk-0 vector is stored" (the batch with chunk 0 is written last)
  tells the cut files from the complete ones, and the listing calls it takes per file.

    python bench/measure_completeness.py
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import lucidrag.base.host as host_module  # noqa: E402
import lucidrag.vectors.vectorscan as vectorscan  # noqa: E402
from lucidrag.ingestion.ingest import UPSERT_BATCH  # noqa: E402
from lucidrag.state.kbstate import KnowledgeBaseState  # noqa: E402
from tests.conftest import FakePlugin, Harness, runtime_loop  # noqa: E402
from tests.fakes import hash_embed  # noqa: E402

host_module.RETRY_DELAYS = (0.0, 0.0, 0.0)
KB = "kb-measure"
WINDOW = 1000  # Milvus' listing window, scaled down so that a file past it stays quick to ingest
BACKENDS = {"chroma": FakePlugin, "milvus": FakePlugin.milvus, "pgvector": FakePlugin.pgvector}
PARAGRAPHS = (1, 40, 700, 3000, 9000)  # files of 1 to 1,300+ chunks (past the scaled window)


def text(paragraphs: int) -> bytes:
    return "\n\n".join(f"Paragraph {i}: component QX-{i} is inspected every {i % 12 + 1} weeks by team {i % 5}."
                       for i in range(paragraphs)).encode()


async def chunks_key_survives(make: Any) -> bool:
    host = make()
    meta = {"file_id": "f", "uuid": "00000000-0000-5000-8000-000000000000", "text": "t", "chunks": 7}
    await host.vector_upsert(KB, [hash_embed("t")], [meta["uuid"]], [meta], ["t"])
    items = (await host.vector_list(KB, filters={"file_id": "f"}, limit=10, offset=0))["items"]
    return bool(items) and items[0]["metadata"].get("chunks") == 7


async def cut_ingest(make: Any, paragraphs: int, landed: int | None) -> tuple[int, int, bool, int]:
    """Ingest a file whose upserts stop after `landed` batches (None: all land). Returns (chunks,
    batches written, judged complete, vector_list calls of the judgement)."""
    host = make()
    if host.list_window is not None:
        host.list_window = WINDOW
    harness = Harness(host)
    real, calls = host.vector_upsert, []

    async def upsert(*args: Any, **kwargs: Any) -> None:
        if landed is not None and len(calls) >= landed:
            raise RuntimeError("cut")
        calls.append(1)
        await real(*args, **kwargs)

    host.vector_upsert = upsert
    host.fail("vector_delete")  # the rollback fails: the cut file's vectors stay
    result = await harness.ingest(KB, "f.txt", text(paragraphs), document_id="f")
    host.faults.clear()
    chunks = len(host.vectors_of(KB, "f")) if landed is not None else result.chunks_created
    before = host.calls["vector_list"]
    record = await KnowledgeBaseState(KB)._record_from_vectors(host, KB, "f")
    return chunks, len(calls), record is not None, host.calls["vector_list"] - before


async def main() -> None:
    vectorscan.LIST_WINDOW = WINDOW
    print(f"upsert batch {UPSERT_BATCH} chunks; listing window scaled to {WINDOW}\n")
    print("backend   `chunks` key kept   files  cut ingests judged complete  complete judged complete  "
          "listings/file (max)")
    for name, make in BACKENDS.items():
        kept = await chunks_key_survives(make)
        cut_total = cut_wrong = whole_total = whole_right = 0
        listings, sizes = [], []
        for paragraphs in PARAGRAPHS:
            chunks, batches, complete, lists = await cut_ingest(make, paragraphs, None)
            sizes.append(chunks)
            whole_total += 1
            whole_right += complete
            listings.append(lists)
            for landed in range(1, batches):
                _, _, judged, lists = await cut_ingest(make, paragraphs, landed)
                cut_total += 1
                cut_wrong += judged
                listings.append(lists)
        print(f"{name:9} {str(kept):19} {len(PARAGRAPHS):5}  {cut_wrong:>4} of {cut_total:<21} "
              f"{whole_right:>4} of {whole_total:<18} {max(listings)}    (files of {sizes} chunks)")


if __name__ == "__main__":
    loop = runtime_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
        asyncio.set_event_loop(None)
