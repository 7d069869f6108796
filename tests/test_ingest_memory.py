"""A big file's vectors are held as one float32 matrix, and become Python lists only
one upsert batch at a time; file records are encoded and decoded off the event loop. Memory is
counted (objects alive at each upsert), not timed."""

from __future__ import annotations

import gc
import threading
from typing import Any

from lucidrag.ingestion.ingest import UPSERT_BATCH
from lucidrag.state.records import FileRecord, file_vector_count
from tests.conftest import FakePlugin, Harness
from tests.fakes import hash_embed
from tests.test_state_runtime import restarted

KB = "kb-memory"
DIM = 96


def paragraphs(count: int) -> bytes:
    return "\n\n".join(f"Record {i}: part PX-{i} ships from warehouse {i % 9}." for i in range(count)).encode()


async def test_a_files_vectors_are_python_lists_only_one_upsert_batch_at_a_time():
    host = FakePlugin(embed=lambda text: hash_embed(text, DIM))
    harness = Harness(host)
    real = host.vector_upsert
    alive: list[int] = []

    async def counting_upsert(collection_id: str, vectors: list[list[float]], *args: Any, **kwargs: Any) -> None:
        alive.append(sum(1 for o in gc.get_objects() if type(o) is list and len(o) == DIM and type(o[0]) is float))
        await real(collection_id, vectors, *args, **kwargs)

    host.vector_upsert = counting_upsert  # type: ignore[method-assign]
    host.collections[KB] = {}
    stored = host.collections[KB]
    result = await harness.ingest(KB, "parts.txt", paragraphs(700), settings={"chunk_size": 64, "chunk_overlap": 0})

    assert result.chunks_created > 5 * UPSERT_BATCH and len(alive) > 5
    # the fake host keeps what it was sent: batches already upserted are its lists, not the plugin's
    sent_before = [min(UPSERT_BATCH * i, result.chunks_created) for i in range(len(alive))]
    assert max(n - before for n, before in zip(alive, sent_before)) <= UPSERT_BATCH
    assert len(stored) == file_vector_count(result.chunks_created)  # its chunks and its document vector


async def test_file_records_are_encoded_and_decoded_off_the_event_loop(harness: Harness, host, monkeypatch):
    on_loop: list[str] = []
    encode, decode = FileRecord.to_bytes, FileRecord.from_bytes

    def note(name: str) -> None:
        if threading.current_thread() is threading.main_thread():
            on_loop.append(name)

    def to_bytes(self: FileRecord) -> bytes:
        note("to_bytes")
        return encode(self)

    def from_bytes(cls: type[FileRecord], blob: bytes) -> FileRecord:
        note("from_bytes")
        return decode(blob)

    monkeypatch.setattr(FileRecord, "to_bytes", to_bytes)
    monkeypatch.setattr(FileRecord, "from_bytes", classmethod(from_bytes))

    first = await harness.ingest(KB, "a.txt", paragraphs(40))
    await harness.ingest(KB, "b.txt", paragraphs(30) + b" second file")
    back = restarted(host)
    assert await back.texts(KB, "warehouse PX-7", settings={"search_mode": "keyword"})
    assert await back.component.delete_document(KB, first.document_id) is True
    assert on_loop == []
