"""What a FileRecord keeps in plugin storage, and what a record rebuilt from the vector DB gives
back (lucidrag/state/records.py): the chunks' order, headings, pages, parents and the file's name
and format, which citations, neighbour windows and parent passages are made of.

Written against the survivors of a mutation run of records.py (docs/TESTING.md).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from lucidrag.state.records import ChunkRecord, FileRecord, merge_rebuilt
from lucidrag.state.storage_keys import file_record_key
from lucidrag.state.store import KbStore
from tests.conftest import FakePlugin, Harness
from tests.samples import pdf_bytes

KB = "kb-records"
FILE = "doc-1"


class IdOrderedHost(FakePlugin):
    """Lists a collection in id order, as Qdrant and Milvus do, not in the order it was written."""

    async def vector_list(self, collection_id: str, filters: dict[str, Any] | None = None,
                          limit: int = 20, offset: int = 0) -> dict[str, Any]:
        whole = await super().vector_list(collection_id, filters=filters, limit=1 << 30, offset=0)
        items = sorted(whole["items"], key=lambda item: item["id"])
        return {"items": items[offset : offset + limit], "total": whole["total"]}


def restarted(host: IdOrderedHost) -> Harness:
    """A new plugin process over the same vector DB and plugin storage."""
    fresh = IdOrderedHost()
    fresh.collections, fresh.dims, fresh.storage = host.collections, host.dims, host.storage
    return Harness(fresh)


def manual_pdf() -> bytes:
    pages = [
        ["Pump manual"] + [f"Seal check {i}: the seal of pump P-{i} is replaced every {i + 2} months." for i in range(30)],
        [f"Bearing note {i}: bearing B-{i} is greased with lithium grease every {i + 3} weeks." for i in range(30)],
        [f"Valve note {i}: valve V-{i} is tested at {i + 10} bar before delivery." for i in range(30)],
    ]
    return pdf_bytes(pages, outline=[("Seals", 0, 0), ("Bearings", 0, 1), ("Valves", 0, 2)])


async def test_a_lost_record_is_rebuilt_from_vectors_that_keep_metadata_with_order_headings_pages_and_name():
    host = IdOrderedHost()
    harness = Harness(host)
    result = await harness.ingest(KB, "manual.pdf", manual_pdf(), settings={"chunk_size": 400, "chunk_overlap": 0},
                                  document_id=FILE)
    await harness.ingest(KB, "tea.txt", b"Oolong tea is partially oxidised.")  # a record storage keeps
    before = await harness.invoke(KbStore(host, KB).load_record, FILE)
    assert before is not None and result.document_id == FILE
    assert len(before.chunks) >= 4 and before.name and before.format == "pdf"
    assert {c.page for c in before.chunks} >= {1, 2, 3} and all(c.heading for c in before.chunks)
    listed = [c.chunk_id for c in sorted(before.chunks, key=lambda c: c.chunk_id)]
    assert listed != [c.chunk_id for c in before.chunks], "the listing order is not the chunk order"
    for key in [k for k in host.storage if k.startswith(file_record_key(KB, FILE))]:
        del host.storage[key]

    back = restarted(host)
    hit = (await back.retrieve(KB, "Which bar is valve V-7 tested at?", settings={"search_mode": "vector"})).results[0]
    assert "V-7" in hit.content[0].text
    assert hit.metadata["page"] == 3 and hit.metadata["heading"].endswith("Valves")
    assert hit.metadata["document_name"] == before.name

    rebuilt = await back.invoke(KbStore(host, KB).load_record, FILE)  # saved back by the query
    assert rebuilt == FileRecord(FILE, "pdf", [replace(c, parent=None) for c in before.chunks], [], before.name)


def test_a_record_rebuilt_from_a_listing_reads_each_items_text_index_page_and_the_files_format_and_name():
    items = [
        {"id": "c", "document": "third", "metadata": {"file_id": FILE, "chunk_index": 2.0, "page": 0}},
        {"id": "x", "document": "", "metadata": {"file_id": FILE, "chunk_index": 1}},  # no text: not a chunk
        {"id": "a", "document": "ignored", "metadata": {
            "file_id": FILE, "text": "first", "chunk_index": 0, "page": 3, "heading": "Pump › Seals",
            "format": "pdf", "document_name": "Pump manual"}},
        {"id": "b", "document": "fourth", "metadata": None},  # no index: its place in the listing
    ]
    record = FileRecord.from_vector_items(FILE, items)
    assert record == FileRecord(FILE, "pdf", [
        ChunkRecord("a", FILE, 0, "first", "Pump › Seals", 3, None, "Pump manual"),
        ChunkRecord("c", FILE, 2, "third", "", None, None, ""),
        ChunkRecord("b", FILE, 3, "fourth", "", None, None, ""),
    ], [], "Pump manual")


def stored_record(name: str = "Pump manual") -> FileRecord:
    chunks = [ChunkRecord(f"id-{i}", FILE, i, f"Pump › Seals\n\nStep {i}: tighten bolt {i}.", "Pump › Seals", i + 1,
                          0, name) for i in range(4)]
    return FileRecord(FILE, "pdf", chunks, ["Pump › Seals\n\nEvery step."], name, {"pages": 4})


def milvus_items(record: FileRecord, order: list[int], texts: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """What Milvus lists for a record's chunks: text, file_id and uuid, in `order`."""
    out = []
    for i in order:
        c = record.chunks[i]
        text = (texts or {}).get(i, c.text)
        out.append({"id": c.chunk_id, "document": text, "metadata": {"text": text, "file_id": FILE, "uuid": c.chunk_id}})
    return out


def test_a_rebuild_that_finds_exactly_the_stored_chunks_keeps_the_stored_record_itself():
    stored = stored_record()
    rebuilt = FileRecord.from_vector_items(FILE, milvus_items(stored, [3, 1, 0, 2]))
    assert merge_rebuilt(stored, rebuilt) is stored  # with its OCR facts, and nothing to save again


def test_a_rebuild_keeps_what_the_vectors_lost_for_unchanged_chunks_and_names_a_changed_one():
    """Milvus lists by primary key and keeps no metadata: the unchanged chunks take order, heading,
    page and parent from the stored record; the changed one comes last, named like the file."""
    stored = stored_record()
    rebuilt = FileRecord.from_vector_items(FILE, milvus_items(stored, [3, 2, 1, 0], {0: "Step 0: loosen bolt 0."}))
    merged = merge_rebuilt(stored, rebuilt)
    kept = stored.chunks
    assert merged == FileRecord(FILE, "pdf", [
        kept[1], kept[2], kept[3],
        ChunkRecord("id-0", FILE, 3, "Step 0: loosen bolt 0.", "", None, None, "Pump manual"),
    ], list(stored.parents), "Pump manual")


def test_a_rebuild_of_a_newer_version_drops_the_stale_parents_and_takes_the_new_name_and_format():
    stored = stored_record()
    newer = FileRecord(FILE, "docx", [ChunkRecord(f"id-{i}", FILE, i, f"New step {i}.", "Pump", None, None, "Pump guide")
                                      for i in range(2)], [], "Pump guide")
    assert merge_rebuilt(stored, newer) == newer


def test_unchanged_chunks_of_a_record_stored_before_names_existed_take_the_name_and_keep_the_rest():
    stored = stored_record(name="")
    chunks = [replace(c, document_name="Pump manual") for c in stored.chunks]  # the vectors carry the name
    extra = ChunkRecord("id-4", FILE, 4, "Step 4: done.", "Pump › Seals", 5, None, "Pump manual")
    merged = merge_rebuilt(stored, FileRecord(FILE, "pdf", [replace(c, parent=None) for c in chunks] + [extra],
                                              name="Pump manual"))
    assert merged == FileRecord(FILE, "pdf", chunks + [extra], list(stored.parents), "Pump manual")


def test_a_record_round_trips_through_its_bytes_with_parents_pages_and_ocr():
    record = FileRecord(FILE, "pdf", [
        ChunkRecord("id-0", FILE, 0, "泵的密封每 900 小时更换。", "泵 › 密封", 2, 1, "泵手册"),
        ChunkRecord("id-1", FILE, 1, "Grease monthly.", "", None, None, "泵手册"),
    ], ["parent zero", "泵 › 密封\n\nparent one"], "泵手册", {"pages": 2, "engine": "tesseract"})
    assert FileRecord.from_bytes(record.to_bytes()) == record


async def test_filters_select_by_the_page_and_parent_each_chunk_carries(harness: Harness):
    """A chunk without a page (a text file) carries page 0, not page 1; children carry their
    parent's number (a strict backend refuses a null)."""
    manual = await harness.ingest(KB, "manual.pdf", manual_pdf(), settings={"chunk_size": 400, "chunk_overlap": 0})
    tea = await harness.ingest(KB, "tea.txt", b"Oolong tea is partially oxidised. Tieguanyin comes from Anxi.")
    body = "\n\n".join(f"Fact {i}: the Quenby valve number {i} opens at {i * 3} bar." for i in range(12))
    valves = await harness.ingest(KB, "valves.txt", body.encode(),
                                  settings={"chunking": "parent_child", "chunk_size": 64, "chunk_overlap": 0})
    assert valves.status.value == "completed"

    async def found(where: dict[str, Any], query: str) -> list[tuple[str, int]]:
        results = (await harness.retrieve(KB, query, filters=where, settings={"top_k": 50})).results
        return sorted({(r.metadata["file_id"], r.metadata["chunk_index"]) for r in results})

    everything = "Oolong tea Tieguanyin seal pump Quenby valve bar"
    assert {f for f, _ in await found({"page": 0}, everything)} == {tea.document_id, valves.document_id}
    assert {f for f, _ in await found({"page": {"$gte": 1}}, everything)} == {manual.document_id}

    record = await harness.invoke(KbStore(harness.host, KB).load_record, valves.document_id)
    assert record is not None and len(record.parents) >= 2
    second = {c.index for c in record.chunks if c.parent == 1}
    hits = await found({"parent": 1}, "Quenby valve number opens at bar")
    assert hits and {f for f, _ in hits} == {valves.document_id} and {i for _, i in hits} <= second
