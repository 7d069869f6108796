"""A document id uploaded again: only its latest upload answers, and nothing once that failed
(LangBot shows the file as failed)."""

from __future__ import annotations

from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from tests.conftest import FakePlugin, Harness
from tests.test_state_runtime import long_text, restarted

KB = "kb-reupload"
SOLAR = b"The solar array on building C produces 42 kilowatts at noon in June."


async def answering(harness: Harness, query: str) -> set[str]:
    found: set[str] = set()
    for mode in ("vector", "keyword", "hybrid"):
        response = await harness.retrieve(KB, query, settings={"search_mode": mode})
        found |= {str(e.metadata.get("file_id")) for e in response.results}
    return found


async def test_a_re_upload_that_fails_before_writing_anything_leaves_no_earlier_version_to_answer(
        harness: Harness, host: FakePlugin):
    first = await harness.ingest(KB, "solar.txt", SOLAR)
    assert first.document_id in await answering(harness, "solar array kilowatts")

    again = await harness.ingest(KB, "solar.pdf", b"%PDF-1.7 this is not a readable PDF",
                                 document_id=first.document_id)

    assert again.status == DocumentStatus.FAILED
    assert first.document_id not in await answering(harness, "solar array kilowatts")
    assert host.vectors_of(KB, first.document_id) == []
    assert first.document_id not in await answering(restarted(host), "solar array kilowatts")


async def test_a_shorter_re_upload_whose_earlier_version_the_vector_db_would_not_delete_fails_and_answers_neither(
        harness: Harness, host: FakePlugin):
    """The vector DB refuses the delete of the earlier version (and then its removal): writing the
    new, shorter version over it would leave the earlier version's last passages answered as this
    document. The upload fails, and neither version answers, now or after a restart."""
    first = await harness.ingest(KB, "manual.txt", long_text(200))
    assert first.status == DocumentStatus.COMPLETED and first.chunks_created > 1
    host.fail("vector_delete")
    again = await harness.ingest(KB, "solar.txt", SOLAR, document_id=first.document_id)
    assert again.status == DocumentStatus.FAILED
    question = "component QX-150 inspected weeks team"
    assert first.document_id not in await answering(harness, question)
    host.faults.clear()
    back = restarted(host)
    assert first.document_id not in await answering(back, question)
    assert host.vectors_of(KB, first.document_id) == []
