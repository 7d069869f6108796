"""The fault suite: every bad input or host failure ends FAILED with a message that says what
happened and what to do, and leaves no vectors behind. Nothing ever raises into the host."""

from __future__ import annotations

import asyncio
import re

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from tests import samples
from tests.conftest import Harness
from tests.fakes import ActionCallTimeoutError, hash_embed
from tests.test_engine import KB, SOLAR, long_text


def _truncated_pdf() -> bytes:
    data = samples.pdf_bytes([["Some text on a page that is long enough."]] * 3)
    return data[: len(data) // 2]


BAD_FILES = [
    ("empty.txt", b"", r"empty"),
    ("blank.txt", b" \n\t \r\n  ", r"whitespace"),
    ("garbage.txt", bytes(range(256)) * 40, r"not (a )?text|binary"),
    ("broken.pdf", _truncated_pdf(), r"damaged|truncated|corrupt"),
    ("locked.pdf", samples.encrypted_pdf_bytes(), r"password|encrypted"),
    ("scan.pdf", samples.image_only_pdf_bytes(), r"not even by OCR.*scan it again"),
    ("data.xyz", bytes(range(256)) * 10, r"Unsupported file type \.xyz.*Supported"),
    ("photo.png", b"\x89PNG\r\n\x1a\n" + bytes(64), r"damaged.*Save it again as PNG or JPEG"),
    ("old.doc", samples.ole_bytes("WordDocument"), r"\.docx"),
]


@pytest.mark.parametrize("name, data, message", BAD_FILES, ids=[b[0] for b in BAD_FILES])
async def test_bad_file_fails_with_an_actionable_message_and_leaves_nothing(harness: Harness, host, name, data, message):
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    result = await harness.ingest(KB, name, data)
    assert result.status == DocumentStatus.FAILED
    assert result.document_id  # the host needs the id to let the user delete the failed file
    assert re.search(message, result.error_message, re.I), result.error_message
    assert host.vector_count(KB) == 0
    assert await harness.component.delete_document(KB, result.document_id) is True


async def test_embedding_error_fails_with_the_providers_reason(harness: Harness, host):
    host.fail("invoke_embedding", error=RuntimeError("401 invalid api key"))
    result = await harness.ingest(KB, "a.txt", SOLAR)
    assert result.status == DocumentStatus.FAILED
    assert "401 invalid api key" in result.error_message and "embedding model" in result.error_message
    assert host.vector_count(KB) == 0


async def test_wrong_vector_count_is_reported_in_plain_words(host):
    def short(texts):
        return [hash_embed(t) for t in texts][:-1]

    harness = Harness(host)
    original = host.invoke_embedding

    async def broken(embedding_model_uuid, texts):
        await original(embedding_model_uuid, texts)
        return short(texts)

    host.invoke_embedding = broken  # type: ignore[method-assign]
    result = await harness.ingest(KB, "big.txt", long_text(3))
    assert result.status == DocumentStatus.FAILED
    # 3 chunks + the document's opening + its opening sentence (the relevance cut's, index/probes.py);
    # the cut's 24 probes, which ride in the same batch (29 texts, 28 vectors back), are not the
    # file's and not counted
    assert "returned 4 vectors for 5 texts" in result.error_message
    assert host.vector_count(KB) == 0


async def test_upsert_failing_on_the_second_batch_rolls_back_the_first(harness: Harness, host):
    state = {"n": 0}

    def second_call(**_):
        state["n"] += 1
        return state["n"] == 2

    host.fail("vector_upsert", when=second_call, error=RuntimeError("disk full"))
    result = await harness.ingest(KB, "big.txt", long_text(300))
    assert result.status == DocumentStatus.FAILED
    assert "disk full" in result.error_message and "upload the file again" in result.error_message
    assert host.calls["vector_upsert"] == 2
    assert host.vector_count(KB) == 0


async def test_transient_timeouts_are_retried_and_the_ingest_succeeds(harness: Harness, host):
    state = {"n": 0}

    def first_two(**_):
        state["n"] += 1
        return state["n"] <= 2

    host.fail("invoke_embedding", when=first_two, error=ActionCallTimeoutError("Action invoke_embedding call timed out"))
    result = await harness.ingest(KB, "a.txt", SOLAR)  # conftest: retries without the back-off delays
    assert result.status == DocumentStatus.COMPLETED
    assert host.calls["invoke_embedding"] == 3


async def test_file_stream_failure_is_a_clear_failed_result(harness: Harness, host):
    host.fail("get_knowledge_file_stream", error=RuntimeError("storage offline"))
    result = await harness.ingest(KB, "a.txt", SOLAR)
    assert result.status == DocumentStatus.FAILED and "Upload it again" in result.error_message


async def test_invalid_creation_settings_fail_the_upload_with_the_reason(harness: Harness, host):
    result = await harness.ingest(KB, "a.txt", SOLAR, settings={"chunk_size": 100, "chunk_overlap": 90})
    assert result.status == DocumentStatus.FAILED
    assert "chunk_overlap (90) must be at most half of chunk_size (100)" in result.error_message


async def test_unexpected_bug_still_returns_failed_never_raises(harness: Harness, host):
    async def explode(*args, **kwargs):
        raise KeyError("boom")

    host.get_knowledge_file_stream = explode  # type: ignore[method-assign]
    result = await harness.ingest(KB, "a.txt", SOLAR)
    assert result.status == DocumentStatus.FAILED and result.document_id


async def test_two_kbs_ingest_concurrently_while_one_fails(host):
    harness = Harness(host)
    host.fail("vector_upsert", when=lambda collection_id, **_: collection_id == "kb-bad",
              error=RuntimeError("collection is read-only"))
    results = await asyncio.gather(
        harness.ingest("kb-good", "a.txt", long_text(50)),
        harness.ingest("kb-bad", "b.txt", long_text(50)),
        harness.ingest("kb-good", "c.txt", SOLAR),
    )
    assert [r.status for r in results] == [DocumentStatus.COMPLETED, DocumentStatus.FAILED, DocumentStatus.COMPLETED]
    assert host.vector_count("kb-bad") == 0
    texts = await harness.texts("kb-good", "solar array kilowatts")
    assert any("42 kilowatts" in t for t in texts)


async def test_retrieve_on_a_broken_vector_db_returns_empty_not_an_exception(harness: Harness, host):
    await harness.ingest(KB, "a.txt", SOLAR)
    host.fail("vector_search", error=RuntimeError("connection refused by qdrant"))
    response = await harness.retrieve(KB, "solar", settings={"search_mode": "vector"})
    assert response.results == [] and "search failed" in response.metadata["error"]


async def test_rerank_failure_falls_back_to_fused_order(harness: Harness, host):
    await harness.ingest(KB, "a.txt", SOLAR)
    host.fail("invoke_rerank", error=RuntimeError("rerank model offline"))
    texts = await harness.texts(KB, "solar kilowatts", settings={"rerank_model_uuid": "rr"})
    assert texts and "42 kilowatts" in texts[0]


async def test_kb_create_with_bad_settings_does_not_raise(harness: Harness):
    await harness.component.on_knowledge_base_create(KB, {"chunk_size": "huge"})
