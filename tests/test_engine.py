"""Ingest / retrieve / delete through the real component, against the contract-following fake host."""

from __future__ import annotations

import asyncio

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus
from langbot_plugin.api.entities.builtin.rag.models import ParseResult, TextSection

from tests import samples
from tests.conftest import Harness

KB = "kb-11111111"
TEA = b"Oolong tea is partially oxidised. The Tieguanyin cultivar comes from Anxi in Fujian."
SOLAR = b"The solar array on building C produces 42 kilowatts at noon in June."
ZH_TEA = "龙井茶产自杭州西湖，属于绿茶。铁观音产自福建安溪，属于乌龙茶。".encode("gbk")


def long_text(paragraphs: int = 200) -> bytes:
    return "\n\n".join(
        f"Section {i}. Machine part PX-{1000 + i} weighs {i * 7} grams and ships from warehouse {i % 9}. "
        + "It is described at length in this paragraph so that every chunk has real content. " * 4
        for i in range(paragraphs)
    ).encode()


async def test_ingest_then_retrieve_returns_the_right_passage_with_scores(harness: Harness):
    await harness.ingest(KB, "tea.txt", TEA)
    await harness.ingest(KB, "solar.txt", SOLAR)
    response = await harness.retrieve(KB, "How many kilowatts does the solar array produce?")
    top = response.results[0]
    assert "42 kilowatts" in top.content[0].text
    assert 0.0 <= top.score <= 1.0 and top.distance == pytest.approx(1.0 - top.score)
    assert top.metadata["format"] == "text" and "citation" in top.metadata


async def test_vectors_carry_flat_metadata_and_uuid_ids(harness: Harness, host):
    result = await harness.ingest(KB, "a.md", b"# Guide\n\n## Install\n\nRun pip install lucidrag.\n")
    metas = host.vectors_of(KB, result.document_id)
    assert metas and all(m["file_id"] == result.document_id for m in metas)
    assert {"text", "chunk_index", "heading", "page", "format"} <= set(metas[0])
    assert metas[0]["heading"] == "Guide › Install"
    assert metas[0]["text"].startswith("Guide › Install\n")
    import uuid
    for chunk_id in host.collections[KB]:
        uuid.UUID(chunk_id)


async def test_gbk_chinese_text_is_found_by_a_chinese_question(harness: Harness):
    await harness.ingest(KB, "tea_zh.txt", ZH_TEA)
    await harness.ingest(KB, "solar.txt", SOLAR)
    texts = await harness.texts(KB, "铁观音产自哪里？")
    assert "福建安溪" in texts[0]


async def test_delete_document_removes_every_vector_and_it_is_never_answered_again(harness: Harness, host):
    tea = await harness.ingest(KB, "tea.txt", TEA)
    await harness.ingest(KB, "solar.txt", SOLAR)
    assert await harness.component.delete_document(KB, tea.document_id) is True
    assert host.vectors_of(KB, tea.document_id) == []
    for mode in ("hybrid", "vector", "keyword"):
        texts = await harness.texts(KB, "Tieguanyin oolong Anxi", settings={"search_mode": mode})
        assert not any("Tieguanyin" in t for t in texts), mode
    assert not any(tea.document_id in k for k in host.storage)


async def test_delete_of_a_document_without_vectors_returns_true(harness: Harness):
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    assert await harness.component.delete_document(KB, "never-ingested") is True


async def test_delete_returns_false_when_the_vector_db_fails_so_the_user_can_retry(harness: Harness, host):
    tea = await harness.ingest(KB, "tea.txt", TEA)
    host.fail("vector_delete")
    assert await harness.component.delete_document(KB, tea.document_id) is False
    host.faults.clear()
    assert await harness.component.delete_document(KB, tea.document_id) is True


async def test_reingest_of_the_same_document_replaces_its_chunks(harness: Harness, host):
    doc = "doc-fixed-id"
    await harness.ingest(KB, "big.txt", long_text(40), document_id=doc)
    first = len(host.vectors_of(KB, doc))
    await harness.ingest(KB, "small.txt", SOLAR, document_id=doc)
    assert len(host.vectors_of(KB, doc)) == 1 < first
    texts = await harness.texts(KB, "machine part PX-1005 weight")
    assert not any("PX-1005" in t for t in texts)


async def test_reupload_of_the_same_file_costs_no_embedding_calls(harness: Harness, host):
    await harness.ingest(KB, "big.txt", long_text(60))
    calls = host.calls["invoke_embedding"]
    await harness.ingest(KB, "big-again.txt", long_text(60))
    assert host.calls["invoke_embedding"] == calls


async def test_embedding_batches_are_bounded_and_shrink_to_what_the_provider_accepts(harness: Harness, host):
    host.max_embed_batch = 10  # refused as LangBot 4.11 reports it: "Invalid request parameters"
    result = await harness.ingest(KB, "big.txt", long_text(80))
    assert result.status == DocumentStatus.COMPLETED
    learned = harness.host.engine.installation("dedicated").batch_sizes["embed-model-1"]
    assert learned.size <= 10
    before = host.calls["invoke_embedding"]
    refused_before = host.oversized_batches
    second = await harness.ingest(KB, "other.txt", long_text(80).replace(b"Machine", b"Robot"))
    # the second file starts at the learned size: at most one oversize probe while it closes in
    chunks = len(host.vectors_of(KB, second.document_id))
    assert host.oversized_batches - refused_before <= 1
    assert host.calls["invoke_embedding"] - before <= -(-chunks // learned.size) + 1


async def test_retrieve_filters_pass_through_and_several_keys_are_wrapped_in_and(harness: Harness, host):
    tea = await harness.ingest(KB, "tea.txt", TEA)
    await harness.ingest(KB, "solar.txt", SOLAR)
    response = await harness.retrieve(KB, "solar kilowatts", filters={"file_id": tea.document_id, "format": "text"},
                                      settings={"relevance_cut": "off"})  # tea.txt does not answer it
    assert response.results and all(r.metadata["file_id"] == tea.document_id for r in response.results)


async def test_unknown_filter_operator_gives_a_clear_error_not_a_crash(harness: Harness):
    await harness.ingest(KB, "tea.txt", TEA)
    response = await harness.retrieve(KB, "tea", filters={"page": {"$regex": "x"}})
    assert response.results == [] and "Unknown filter operator $regex" in response.metadata["error"]


async def test_score_threshold_filters_and_can_drop_everything(harness: Harness):
    await harness.ingest(KB, "tea.txt", TEA)
    await harness.ingest(KB, "solar.txt", SOLAR)
    all_hits = (await harness.retrieve(KB, "solar array kilowatts")).results
    assert all_hits
    cut = all_hits[0].score
    kept = (await harness.retrieve(KB, "solar array kilowatts", settings={"score_threshold": cut})).results
    assert kept and all(r.score >= cut for r in kept)
    none = (await harness.retrieve(KB, "solar array kilowatts", settings={"score_threshold": 1.0})).results
    assert none == []


async def test_parsed_content_from_a_parser_plugin_is_used_instead_of_the_bytes(harness: Harness, host):
    parsed = ParseResult(text="", sections=[
        TextSection(content="The warranty lasts 36 months.", heading="Warranty", level=1, page=2)])
    result = await harness.ingest(KB, "scan.pdf", b"not a pdf at all", parsed=parsed)
    assert result.status == DocumentStatus.COMPLETED
    meta = host.vectors_of(KB, result.document_id)[0]
    assert meta["page"] == 2 and meta["heading"] == "Warranty"


async def test_kb_delete_removes_every_vector_and_all_plugin_state(harness: Harness, host):
    for i in range(3):
        await harness.ingest(KB, f"f{i}.txt", long_text(5) + str(i).encode())
    await harness.ingest("kb-other", "solar.txt", SOLAR)
    await harness.retrieve(KB, "machine part")
    await harness.component.on_knowledge_base_delete(KB)
    assert host.vector_count(KB) == 0
    assert not any(KB in key for key in host.storage)
    assert host.vector_count("kb-other") == 1  # the other KB is untouched
    assert (await harness.retrieve(KB, "machine part")).results == []


async def test_kb_delete_also_finds_vectors_whose_record_was_never_saved(harness: Harness, host):
    host.fail("set_plugin_storage")  # e.g. a host with SQLAlchemy 2.1: every storage write fails
    result = await harness.ingest(KB, "tea.txt", TEA)
    assert result.status == DocumentStatus.COMPLETED  # storage failure never fails an ingest
    host.faults.clear()
    fresh = Harness(type(host)())  # a restarted plugin process: no memory of the file
    fresh.host.collections, fresh.host.storage = host.collections, host.storage
    await fresh.component.on_knowledge_base_delete(KB)
    assert host.vector_count(KB) == 0


async def test_state_is_rebuilt_from_the_vector_db_after_a_restart_without_storage(harness: Harness, host):
    host.fail("set_plugin_storage")
    await harness.ingest(KB, "tea.txt", TEA)
    await harness.ingest(KB, "solar.txt", SOLAR)
    fresh = Harness(type(host)())
    fresh.host.collections = host.collections
    texts = await fresh.texts(KB, "Tieguanyin", settings={"search_mode": "keyword"})
    assert texts and "Tieguanyin" in texts[0]


async def test_two_kbs_never_see_each_others_chunks(harness: Harness):
    await harness.ingest("kb-a", "tea.txt", TEA)
    await harness.ingest("kb-b", "solar.txt", SOLAR)
    for mode in ("hybrid", "keyword", "vector"):
        a = await harness.texts("kb-a", "solar kilowatts", settings={"search_mode": mode})
        b = await harness.texts("kb-b", "Tieguanyin oolong", settings={"search_mode": mode})
        assert not any("kilowatts" in t for t in a) and not any("Tieguanyin" in t for t in b)


async def test_installation_revocation_drops_its_state(harness: Harness):
    from main import LucidRagPlugin

    plugin = LucidRagPlugin()
    plugin.engine.installation("inst-1").kb("kb")
    plugin.engine.installation("inst-2").kb("kb")

    class Binding:
        installation_uuid = "inst-1"

    await plugin.on_installation_revoked(Binding())
    assert set(plugin.engine.installations) == {"inst-2"}


async def test_ingest_of_a_real_docx_pptx_xlsx_pdf_end_to_end(harness: Harness, host):
    files = {
        "manual.docx": samples.docx_bytes(),
        "deck.pptx": samples.pptx_bytes(),
        "sheet.xlsx": samples.xlsx_bytes(),
        "paper.pdf": samples.pdf_bytes([["The first page talks about apples."], ["Page two covers pears."]]),
    }
    for name, data in files.items():
        result = await harness.ingest(KB, name, data)
        assert result.status == DocumentStatus.COMPLETED, (name, result.error_message)
    hit = (await harness.retrieve(KB, "pears"))
    assert any(r.metadata["page"] == 2 and "pears" in r.content[0].text for r in hit.results)


async def test_ingest_and_delete_racing_a_first_load_stay_consistent(harness: Harness, host):
    old = await harness.ingest(KB, "tea.txt", TEA)
    fresh = Harness(type(host)())  # a restarted process: the next query loads state from storage
    fresh.host.collections, fresh.host.storage, fresh.host.files = host.collections, host.storage, host.files
    slow_get = fresh.host.get_plugin_storage

    async def slow(key):  # the value is read, then the load stalls before using it
        value = await slow_get(key)
        await asyncio.sleep(0.05)
        return value

    fresh.host.get_plugin_storage = slow  # type: ignore[method-assign]
    load = asyncio.create_task(fresh.retrieve(KB, "warm-up"))
    await asyncio.sleep(0.01)
    new, deleted = await asyncio.gather(fresh.ingest(KB, "solar.txt", SOLAR),
                                        fresh.component.delete_document(KB, old.document_id))
    await load
    assert deleted is True
    keyword = await fresh.texts(KB, "Tieguanyin solar kilowatts", settings={"search_mode": "keyword"})
    assert any("kilowatts" in t for t in keyword)
    assert not any("Tieguanyin" in t for t in keyword)
