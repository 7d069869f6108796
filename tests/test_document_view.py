"""A file's overall meaning takes part in ranking: of two equally worded passages, the one in the
document that is about the question comes first; and a file's document vector is stored, counted
and deleted with the file, carries its text and says what it is, and is never taken for a chunk."""

from __future__ import annotations

import pytest

from lucidrag.state.records import (
    DOCUMENT_VECTOR_KIND,
    VECTOR_KIND_KEY,
    FileRecord,
    document_vector_id,
    is_document_vector,
)
from lucidrag.state.storage_keys import file_record_key
from tests.conftest import FakePlugin, Harness
from tests.test_state_runtime import restarted

KB = "kb-docview"
SHARED = ("The request must be sent within thirty days, together with the order number and a short "
          "description of the problem.")
# Headless texts (their first lines end with a full stop, so they are not titles) of three
# paragraphs each: several chunks per file, the last one worded the same in both files.
REFUNDS = "\n\n".join([
    "Refunds are paid back to the card that was charged. A refund request for a returned parcel is "
    "answered once the warehouse has checked the goods; a refund request for a cancelled order is "
    "answered at once. Every refund request gets a reference number by email.",
    "A refund covers the price of the goods and the original shipping cost. Return shipping is "
    "refunded only when the goods were faulty. The deadline for a refund request on faulty goods is "
    "two years; partial refunds are made for goods returned incomplete.",
    SHARED,
])
BACKUPS = "\n\n".join([
    "Server backups run every night at two o'clock. Each backup is copied to the second data centre "
    "and kept for ninety days; the monthly backup of the first night of a month is kept for a year. "
    "Backups are encrypted, and their keys are rotated every quarter by operations.",
    "Restoring a backup takes about an hour for a small database and up to a day for the archive. "
    "Operations restore test copies every week to prove that the backups can be read. A single table "
    "can be restored from the nightly backups of the last month.",
    SHARED,
])
CREATION = {"chunk_size": 320, "chunk_overlap": 0}  # one paragraph per chunk
QUESTION = "What is the deadline for my refund request?"


async def two_files(harness: Harness, refunds_first: bool) -> None:
    files = [("refunds.txt", REFUNDS, "refunds"), ("backups.txt", BACKUPS, "backups")]
    for name, text, document_id in files if refunds_first else files[::-1]:
        await harness.ingest(KB, name, text.encode(), settings=CREATION, document_id=document_id)


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
@pytest.mark.parametrize("refunds_first", [True, False], ids=["refunds-uploaded-first", "backups-uploaded-first"])
async def test_the_passage_of_the_document_about_the_question_outranks_its_equal_elsewhere(
        harness: Harness, mode: str, refunds_first: bool):
    await two_files(harness, refunds_first)
    response = await harness.retrieve(KB, QUESTION, settings={"search_mode": mode, "top_k": 10},
                                      creation=CREATION)
    shared = [entry.metadata["file_id"] for entry in response.results if SHARED in entry.content[0].text]
    assert shared[:1] == ["refunds"], [(e.metadata["file_id"], e.content[0].text) for e in response.results]


async def test_a_files_document_vector_is_deleted_with_it(harness: Harness, host):
    await two_files(harness, refunds_first=True)
    assert document_vector_id("refunds") in host.collections[KB]
    assert await harness.component.delete_document(KB, "refunds") is True
    left = {str(meta["file_id"]) for _, meta in host.collections[KB].values()}
    assert left == {"backups"}


# --------------------------------------------------------------------------- what the collection holds
BACKENDS = {"chroma": FakePlugin, "milvus": FakePlugin.milvus, "pgvector": FakePlugin.pgvector}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
async def test_every_vector_carries_its_text_and_the_document_vector_says_what_it_is(backend: str):
    """Anyone opening the collection (an operator, LangBot's own search, a migration) reads each
    vector's text: the document vector's is the file's opening, and its metadata marks it (where
    the backend keeps the mark; its id tells everywhere)."""
    host = BACKENDS[backend]()
    harness = Harness(host)
    await two_files(harness, refunds_first=True)
    stored = host.collections[KB]
    assert stored and all(str(meta.get("text") or "").strip() for _, meta in stored.values())
    assert all(isinstance(v, (str, int)) for _, meta in stored.values() for v in meta.values())
    _, document = stored[document_vector_id("refunds")]
    assert document["text"].startswith("Refunds are paid back to the card")
    assert is_document_vector(document_vector_id("refunds"), document)
    chunks = [(i, meta) for i, (_, meta) in stored.items() if i != document_vector_id("refunds")
              and meta["file_id"] == "refunds"]
    assert chunks and not any(is_document_vector(i, meta) for i, meta in chunks)
    if backend == "chroma":
        assert document[VECTOR_KIND_KEY] == DOCUMENT_VECTOR_KIND and document["document_name"]


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("written_by", ["this-version", "an-earlier-version"])
async def test_a_restart_rebuilding_records_from_the_vectors_takes_the_document_vector_for_no_chunk(
        backend: str, written_by: str):
    """Plugin storage lost: the restart finds the files in the vector DB and rebuilds each record
    from its vectors, chunks only (also from a collection an earlier version wrote, whose document
    vectors have text ""), and no answer is the document vector."""
    host = BACKENDS[backend]()
    harness = Harness(host)
    await two_files(harness, refunds_first=True)
    chunks = {f: len([m for i, (_, m) in host.collections[KB].items() if m["file_id"] == f]) - 1
              for f in ("refunds", "backups")}
    if written_by == "an-earlier-version":
        for file_id in chunks:
            vector, _ = host.collections[KB][document_vector_id(file_id)]
            host.collections[KB][document_vector_id(file_id)] = (
                vector, {"file_id": file_id, "uuid": document_vector_id(file_id), "text": ""})
    host.storage.clear()
    back = restarted(host)
    for mode in ("keyword", "vector", "hybrid"):
        response = await back.retrieve(KB, QUESTION, settings={"search_mode": mode, "top_k": 10}, creation=CREATION)
        ids = [entry.id for entry in response.results]
        assert ids and not {document_vector_id(f) for f in chunks} & set(ids), mode
        assert all(entry.content[0].text.strip() for entry in response.results)
    records = {f: FileRecord.from_bytes(host.storage[file_record_key(KB, f)][1:]) for f in chunks}
    assert {f: len(r.chunks) for f, r in records.items()} == chunks
    assert not any(c.chunk_id == document_vector_id(f) for f, r in records.items() for c in r.chunks)
