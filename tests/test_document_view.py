"""A file's overall meaning takes part in ranking: of two equally worded passages, the one in the
document that is about the question comes first; and a file's document vector is stored, counted
and deleted with the file."""

from __future__ import annotations

import pytest

from lucidrag.state.records import document_vector_id
from tests.conftest import Harness

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
