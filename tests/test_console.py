"""The LucidRAG console (sidebar Page) and what it relies on: failure records, saved creation
settings, document titles and per-hit scores. Driven through the real KnowledgeEngine component
and the real Page component against the contract-following fake host; no browser."""

from __future__ import annotations

import asyncio
import io
import json
import re
import uuid
import zlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from langbot_plugin.api.definition.components.page import PageRequest, PageResponse
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from components.pages.console.console import LucidRagConsole
from lucidrag.state.records import FileRecord
from lucidrag.state.storage_keys import (
    failure_key,
    file_record_key,
    journal_key,
)
from tests import samples
from tests.cjk_font import NO_CJK_FONT, cjk_font
from tests.conftest import MODEL, FakePlugin, Harness
from tests.fakes import ActionCallTimeoutError

ROOT = Path(__file__).resolve().parent.parent
KB = "kb-console-1"
SOLAR = b"The solar array on building C produces 42 kilowatts at noon in June."
TEA = b"Oolong tea is partially oxidised. The Tieguanyin cultivar comes from Anxi in Fujian."


class ConsoleHost(FakePlugin):
    """FakePlugin plus `list_knowledge_bases` as LangBot 4.11.2 answers it (pkg/plugin/handler.py):
    every KB of the workspace, any engine, as {uuid, name, description} only."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.workspace_kbs: dict[str, str] = {}

    async def list_knowledge_bases(self) -> list[dict[str, Any]]:
        self._enter("list_knowledge_bases")
        return [{"uuid": k, "name": n, "description": ""} for k, n in self.workspace_kbs.items()]


@pytest.fixture
def host() -> ConsoleHost:
    return ConsoleHost()


@pytest.fixture
def page(host: ConsoleHost) -> LucidRagConsole:
    component = LucidRagConsole()
    component.plugin = host  # type: ignore[assignment]
    return component


async def api(page: LucidRagConsole, endpoint: str, **body: Any) -> dict[str, Any]:
    response = await page.handle_api(PageRequest(endpoint=endpoint, method="POST", body=body))
    assert isinstance(response, PageResponse) and response.error is None
    return response.data


async def create_kb(harness: Harness, host: ConsoleHost, kb_id: str = KB, name: str = "Manuals",
                    **settings: Any) -> None:
    host.workspace_kbs[kb_id] = name
    await harness.component.on_knowledge_base_create(kb_id, {"embedding_model_uuid": MODEL, **settings})


def rows(detail: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["file_id"]: r for r in detail["files"]}


def today() -> str:
    return datetime.now(timezone.utc).date().isoformat()


# ---------------------------------------------------------------------- failed files say why
async def test_a_failed_file_shows_its_reason_and_what_to_do(harness: Harness, host, page):
    await create_kb(harness, host)
    result = await harness.ingest(KB, "locked.pdf", samples.encrypted_pdf_bytes())
    assert result.status == DocumentStatus.FAILED
    detail = await api(page, "/kb", kb_id=KB)
    row = rows(detail)[result.document_id]
    assert row["status"] == "failed" and row["format"] == "pdf"
    assert row["reason"] == result.error_message and re.search("password|encrypted", row["reason"])
    assert "password" in row["advice"].lower() and row["advice_key"] == "encrypted"
    assert row["title"].startswith("PDF file, ") and today() in row["title"]
    assert detail["health"]["failed_files"] == 1


async def test_an_upload_that_failed_after_writing_vectors_is_no_longer_listed_as_uploading(harness: Harness, host, page):
    from tests.test_file_states import failing_after_its_first_batch
    from tests.test_state_runtime import long_text

    await create_kb(harness, host)
    failing_after_its_first_batch(host)
    host.faults.pop("vector_delete")  # the failed upload's vectors are removed
    result = await harness.ingest(KB, "parts.txt", long_text(400), settings={"chunk_size": 128, "chunk_overlap": 0})
    assert result.status == DocumentStatus.FAILED and host.vectors_of(KB, result.document_id) == []
    host.faults.clear()
    statuses = [r["status"] for r in (await api(page, "/kb", kb_id=KB))["files"] if r["file_id"] == result.document_id]
    assert statuses == ["failed"], statuses


async def test_an_upload_refused_by_storage_before_any_vector_is_not_listed_as_uploading(harness: Harness, host, page):
    await create_kb(harness, host)
    await harness.ingest(KB, "tea.txt", TEA)
    host.fail("set_plugin_storage", when=lambda key, **_: "journal" in key)  # its journal entry is refused
    result = await harness.ingest(KB, "solar.txt", SOLAR)
    assert result.status == DocumentStatus.FAILED and host.vectors_of(KB, result.document_id) == []
    host.faults.clear()
    rows = [r for r in (await api(page, "/kb", kb_id=KB))["files"] if r["file_id"] == result.document_id]
    assert all(r["status"] != "ingesting" for r in rows), rows


async def test_two_failed_uploads_of_one_day_can_be_told_apart_and_matched_to_langbots_rows(
        harness: Harness, host, page):
    await create_kb(harness, host)
    first = await harness.ingest(KB, "a.pdf", samples.encrypted_pdf_bytes())
    second = await harness.ingest(KB, "b.pdf", samples.encrypted_pdf_bytes() + b"\n%padding\n" * 200)
    failed = rows(await api(page, "/kb", kb_id=KB))
    titles = {failed[r.document_id]["title"] for r in (first, second)}
    assert len(titles) == 2, titles  # size (and the time to the second) in the title
    assert all(re.search(r"\d\d:\d\d:\d\d UTC", t) and re.search(r"\d+(\.\d)? (bytes|KB)", t) for t in titles)
    # LangBot's file list shows the storage key: each row names it
    keys = {path.rsplit("/", 1)[-1] for path in host.files if path.endswith(".pdf")}
    assert {failed[r.document_id]["langbot_file"] for r in (first, second)} == keys


async def test_the_failure_record_goes_when_the_file_is_deleted_or_later_ingests(harness: Harness, host, page):
    await create_kb(harness, host)
    failed = await harness.ingest(KB, "locked.pdf", samples.encrypted_pdf_bytes())
    assert failure_key(KB, failed.document_id) in host.storage
    assert await harness.component.delete_document(KB, failed.document_id) is True
    assert failure_key(KB, failed.document_id) not in host.storage

    host.fail("vector_upsert", error=RuntimeError("disk full"))
    retried = await harness.ingest(KB, "a.txt", SOLAR)
    assert retried.status == DocumentStatus.FAILED and failure_key(KB, retried.document_id) in host.storage
    host.faults.clear()
    ok = await harness.ingest(KB, "a.txt", SOLAR, document_id=retried.document_id)
    assert ok.status == DocumentStatus.COMPLETED
    assert failure_key(KB, retried.document_id) not in host.storage
    assert rows(await api(page, "/kb", kb_id=KB))[ok.document_id]["status"] == "ready"


async def test_broken_plugin_storage_never_fails_an_upload_or_a_delete(harness: Harness, host):
    host.fail("set_plugin_storage")
    host.fail("delete_plugin_storage")
    failed = await harness.ingest(KB, "locked.pdf", samples.encrypted_pdf_bytes())
    assert failed.status == DocumentStatus.FAILED and "encrypted" in failed.error_message.lower()
    good = await harness.ingest(KB, "a.txt", SOLAR)
    assert good.status == DocumentStatus.COMPLETED
    assert await harness.component.delete_document(KB, failed.document_id) is True
    assert await harness.component.delete_document(KB, good.document_id) is True


# ---------------------------------------------------------------------- invalid creation settings
async def test_invalid_creation_settings_are_flagged_and_every_upload_names_the_range(harness: Harness, host, page):
    await create_kb(harness, host, chunk_size=100, chunk_overlap=90)
    overview = await api(page, "/overview")
    assert overview["knowledge_bases"][0]["invalid_settings"] == ["chunk_overlap"]
    detail = await api(page, "/kb", kb_id=KB)
    [problem] = detail["settings"]["problems"]
    assert problem["name"] == "chunk_overlap" and problem["value"] == 90 and problem["valid"] == "0-50"
    assert detail["settings"]["values"]["chunk_size"] == 100
    assert detail["health"]["index_state"] == "empty" and detail["health"]["chunks"] == 0

    result = await harness.ingest(KB, "a.txt", SOLAR, settings={"chunk_size": 100, "chunk_overlap": 90})
    assert result.status == DocumentStatus.FAILED
    assert "chunk_overlap" in result.error_message and "0-50" in result.error_message
    assert "create a new LucidRAG knowledge base" in result.error_message
    row = rows(await api(page, "/kb", kb_id=KB))[result.document_id]
    assert "new LucidRAG knowledge base" in row["advice"]


async def test_valid_settings_are_not_flagged(harness: Harness, host, page):
    await create_kb(harness, host, chunk_size=800, chunk_overlap=100)
    detail = await api(page, "/kb", kb_id=KB)
    assert detail["settings"]["known"] and detail["settings"]["problems"] == []
    assert (await api(page, "/overview"))["knowledge_bases"][0]["invalid_settings"] == []


# ---------------------------------------------------------------------- scope
async def test_only_this_installations_lucidrag_knowledge_bases_are_shown_or_reachable(harness: Harness, host, page):
    await create_kb(harness, host, KB, "Ours")
    await harness.ingest(KB, "a.txt", SOLAR)
    host.workspace_kbs["kb-other-engine"] = "Another engine's KB"  # in the workspace, not ours
    other = ConsoleHost()  # another installation: its own plugin storage and engine
    other_harness = Harness(other)
    await create_kb(other_harness, other, "kb-theirs", "Theirs")
    await other_harness.ingest("kb-theirs", "tea.txt", TEA)
    host.workspace_kbs["kb-theirs"] = "Theirs"
    host.storage[file_record_key("kb-deleted", "f1")] = b"x"  # left behind by a deleted KB

    await create_kb(harness, host, "kb-0-second", "Zebra manuals")
    listed = [kb["kb_id"] for kb in (await api(page, "/overview"))["knowledge_bases"]]
    assert listed == [KB, "kb-0-second"]  # by name, as the operator reads them
    for endpoint, body in [("/kb", {}), ("/search", {"query": "tea"}), ("/chunks", {"file_id": "f1"}),
                           ("/scan", {}), ("/repair", {"action": "retry_saving_records"})]:
        for kb_id in ("kb-theirs", "kb-other-engine", "kb-deleted"):
            data = await api(page, endpoint, kb_id=kb_id, **body)
            assert "not a LucidRAG knowledge base of this installation" in data["error"], (endpoint, kb_id)


# ---------------------------------------------------------------------- files, chunks, search
async def test_files_show_title_format_chunks_and_pages(harness: Harness, host, page):
    await create_kb(harness, host)
    pdf = await harness.ingest(KB, "guide.pdf", samples.pdf_bytes(
        [["Chapter one text about pumps."], ["Chapter two text about valves."]],
        outline=[("Pumps", 0, 0), ("Valves", 0, 1)]))
    docx = await harness.ingest(KB, "g.docx", samples.docx_bytes())
    detail = await api(page, "/kb", kb_id=KB)
    files = rows(detail)
    assert files[pdf.document_id]["format"] == "pdf" and files[pdf.document_id]["pages"] == "1-2"
    assert files[pdf.document_id]["title"] == "Pumps"  # no /Title metadata: the first heading
    assert files[docx.document_id]["title"] == "Product Guide"
    assert files[docx.document_id]["format"] == "docx" and files[docx.document_id]["chunks"] == docx.chunks_created
    assert detail["health"]["chunks"] == sum(r["chunks"] for r in detail["files"])
    assert detail["health"]["index_state"] == "ready"


async def test_chunk_preview_has_text_heading_and_page(harness: Harness, host, page):
    await create_kb(harness, host)
    pdf = await harness.ingest(KB, "guide.pdf", samples.pdf_bytes(
        [["Chapter one text about pumps."], ["Chapter two text about valves."]],
        outline=[("Pumps", 0, 0), ("Valves", 0, 1)]))
    preview = await api(page, "/chunks", kb_id=KB, file_id=pdf.document_id)
    assert preview["total"] == len(preview["chunks"]) >= 2
    valves = [c for c in preview["chunks"] if "valves" in c["text"]][0]
    assert valves["heading"] == "Valves" and valves["page"] == 2


async def test_search_shows_vector_keyword_and_fused_scores_with_the_citation(harness: Harness, host, page):
    await create_kb(harness, host)
    solar = await harness.ingest(KB, "solar.md", b"# Energy report\n\n" + SOLAR)
    await harness.ingest(KB, "tea.txt", TEA)
    data = await api(page, "/search", kb_id=KB, query="How many kilowatts does the solar array produce?")
    assert data["mode"] == "hybrid"
    top = data["hits"][0]
    assert top["file_id"] == solar.document_id and "42 kilowatts" in top["text"]
    assert top["document_name"] == "Energy report" and top["citation"] == "MARKDOWN"
    assert top["text"].startswith("Energy report\n") and top["text"].count("Energy report") == 1  # heading once
    assert 0 < top["vector_score"] <= 1 and 0 < top["keyword_score"] <= 1
    assert min(top["vector_score"], top["keyword_score"]) <= top["fused_score"] <= max(top["vector_score"], top["keyword_score"])


async def test_search_lists_hits_by_reported_score_and_shows_each_passages_own_evidence(harness: Harness, host, page):
    from tests.test_score_order import KB as ORDER_KB, QUESTION, a_manual_and_notes

    host.workspace_kbs[ORDER_KB] = "Kitchen"
    await a_manual_and_notes(harness)
    hits = (await api(page, "/search", kb_id=ORDER_KB, query=QUESTION))["hits"]
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    files = [h["file_id"] for h in hits]
    demoted = hits[files.index("manual", files.index("manual") + 1)]  # shown after another file's best
    assert demoted["score"] < demoted["fused_score"]
    assert min(demoted["vector_score"], demoted["keyword_score"]) <= demoted["fused_score"] \
        <= max(demoted["vector_score"], demoted["keyword_score"])


async def test_search_without_known_settings_falls_back_to_keywords(harness: Harness, host, page):
    host.workspace_kbs[KB] = "Old KB"
    await harness.ingest(KB, "tea.txt", TEA)
    host.storage.pop(f"lucidrag/v1/kb/{KB}/settings")  # a KB from before settings were saved
    data = await api(page, "/search", kb_id=KB, query="Tieguanyin Anxi")
    assert data["mode"] == "keyword" and data["note"] and data["hits"][0]["vector_score"] is None
    assert host.calls["invoke_embedding"] == 1  # only the upload's, none for the console's search


# ---------------------------------------------------------------------- health and repairs
async def test_orphan_vectors_are_found_and_removed_on_request_only(harness: Harness, host, page):
    await create_kb(harness, host)
    kept = await harness.ingest(KB, "a.txt", SOLAR)
    await api(page, "/kb", kb_id=KB)  # loads the KB state
    # A crash mid-upload: vectors written, no record, the plugin restarted.
    orphan = str(uuid.uuid4())
    await host.vector_upsert(KB, [[0.1] * 64], [str(uuid.uuid4())], [{"file_id": orphan, "text": "stale"}])
    scan = await api(page, "/scan", kb_id=KB)
    assert scan["complete"] and scan["orphans"] == [{"file_id": orphan, "vectors": 1}]
    assert host.vectors_of(KB, orphan)  # a scan changes nothing

    refused = await api(page, "/repair", kb_id=KB, action="remove_orphan_vectors", file_id=kept.document_id)
    assert "delete it in LangBot" in refused["error"] and host.vectors_of(KB, kept.document_id)
    assert await api(page, "/repair", kb_id=KB, action="remove_orphan_vectors", file_id=orphan) == {"removed": orphan}
    assert host.vectors_of(KB, orphan) == [] and host.vectors_of(KB, kept.document_id)
    assert (await api(page, "/scan", kb_id=KB))["orphans"] == []


async def test_interrupted_file_is_shown_with_its_repair(harness: Harness, host, page):
    await create_kb(harness, host)
    await harness.ingest(KB, "a.txt", SOLAR)
    stuck = str(uuid.uuid4())
    host.storage[journal_key(KB, stuck)] = b"{}"
    await host.vector_upsert(KB, [[0.1] * 64], [str(uuid.uuid4())], [{"file_id": stuck, "text": "half"}])
    detail = await api(page, "/kb", kb_id=KB)
    assert rows(detail)[stuck]["status"] == "interrupted" and "upload the file again" in rows(detail)[stuck]["advice"]
    assert detail["health"]["interrupted_files"] == [stuck]
    await api(page, "/repair", kb_id=KB, action="remove_orphan_vectors", file_id=stuck)
    assert host.vectors_of(KB, stuck) == [] and journal_key(KB, stuck) not in host.storage


async def test_records_that_could_not_be_saved_can_be_saved_again(harness: Harness, host, page):
    await create_kb(harness, host)
    await api(page, "/kb", kb_id=KB)  # state loaded, so the ingest keeps the unsaved record in memory
    # record writes fail; the journal entry names the file (a restart adopts it from its vectors)
    host.fail("set_plugin_storage", when=lambda key: "/file/" in key)
    result = await harness.ingest(KB, "a.txt", SOLAR)
    assert result.status == DocumentStatus.COMPLETED
    detail = await api(page, "/kb", kb_id=KB)
    assert detail["health"]["unsaved_records"] == [result.document_id]
    assert rows(detail)[result.document_id]["status"] == "unsaved"
    host.faults.clear()
    repaired = await api(page, "/repair", kb_id=KB, action="retry_saving_records")
    assert repaired == {"saved": [result.document_id], "still_unsaved": []}
    assert file_record_key(KB, result.document_id) in host.storage


async def test_console_errors_reach_the_page_as_data_not_as_a_failed_call(host, page):
    host.fail("get_plugin_storage_keys", error=RuntimeError("db locked"))
    assert "plugin storage is not answering" in (await api(page, "/overview"))["error"]
    assert "Unknown console endpoint" in (await api(page, "/nope"))["error"]


# ---------------------------------------------------------------------- document_name
async def test_every_result_carries_a_human_document_name(harness: Harness, host):
    docx = io.BytesIO()
    import docx as python_docx

    document = python_docx.Document()
    document.core_properties.title = "Warranty Terms 2026"
    document.add_paragraph("The warranty covers the solar inverter for ten years.")
    document.save(docx)
    await harness.ingest(KB, "w.docx", docx.getvalue())
    await harness.ingest(KB, "notes.txt", b"The inverter manual says to reset it with the red button.")
    response = await harness.retrieve(KB, "inverter warranty reset")
    names = {e.content[0].text[:20]: e.metadata["document_name"] for e in response.results}
    titled, untitled = sorted(set(names.values()), key=lambda name: name.startswith("TEXT file"))
    assert titled == "Warranty Terms 2026" and re.fullmatch(rf"TEXT file, {today()} \d\d:\d\d:\d\d UTC", untitled)


def test_titles_come_from_file_metadata(tmp_path):
    import docx as python_docx
    from pptx import Presentation
    from pypdf import PdfWriter

    from lucidrag.ingestion.parsing import parse_file

    buffer = io.BytesIO()
    document = python_docx.Document()
    document.core_properties.title = "Microsoft Word - Handbook"
    document.add_paragraph("text")
    document.save(buffer)
    assert parse_file(buffer.getvalue(), "a.docx").title == "Microsoft Word - Handbook"

    buffer = io.BytesIO()
    deck = Presentation()
    deck.core_properties.title = "Roadmap"
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "First"
    slide.placeholders[1].text = "body"
    deck.save(buffer)
    assert parse_file(buffer.getvalue(), "a.pptx").title == "Roadmap"

    raw = samples.pdf_bytes([["Some text on a page."]])
    writer = PdfWriter(clone_from=io.BytesIO(raw))
    writer.add_metadata({"/Title": "安装手册"})
    buffer = io.BytesIO()
    writer.write(buffer)
    assert parse_file(buffer.getvalue(), "a.pdf").title == "安装手册"


def test_document_name_prefers_title_then_heading_then_format_and_time():
    from lucidrag.ingestion.document import Document, Section, document_name

    at = datetime(2026, 12, 3, 14, 3, 12, tzinfo=timezone.utc)
    sections = (Section("body", ("Chapter 1",)),)
    assert document_name(Document(sections, "docx", title="Microsoft Word - Handbook"), at) == "Handbook"
    assert document_name(Document(sections, "docx", title="Untitled"), at) == "Chapter 1"
    assert document_name(Document((Section("body"),), "csv"), at) == "CSV file, 2026-12-03 14:03:12 UTC"


def test_two_untitled_pictures_of_one_day_get_different_names():
    from lucidrag.ingestion.document import Document, Section, document_name

    picture = Document((Section("The car park closes at eight in the evening."),), "image")
    morning = document_name(picture, datetime(2026, 12, 4, 9, 0, 1, tzinfo=timezone.utc))
    later = document_name(picture, datetime(2026, 12, 4, 9, 0, 2, tzinfo=timezone.utc))
    assert morning == "IMAGE file, 2026-12-04 09:00:01 UTC" and later != morning


@pytest.mark.parametrize(("ocr_text", "title"), [
    ("Parking notice\nCars parked after 8 pm are towed at the owner's cost.", "Parking notice"),
    ("停车场通知\n晚上八点后停放的车辆将被拖走。", "停车场通知"),
    ("Cars parked after 8 pm are towed.\nParking notice", ""),  # a sentence first: no title
    ("Please read the following rules before you park your car in the lot", ""),  # too long to be a title
    ("Opening hours:\nMon-Fri 9-17", ""),  # a label, not a title
    ("|||\nParking notice", ""),  # OCR noise first
    ("12\nParking notice", ""),
])
def test_a_pictures_first_ocr_line_names_it_only_when_it_reads_as_a_title(ocr_text: str, title: str):
    from lucidrag.ingestion.parsing.ocr import title_from

    assert title_from(ocr_text) == title


@pytest.mark.skipif(cjk_font() is None, reason=NO_CJK_FONT)  # the picture's text is rendered with it
async def test_an_untitled_picture_is_named_by_type_and_time_to_the_second(harness: Harness, host, page):
    from tests import ocr_samples

    await create_kb(harness, host)
    png = ocr_samples.image_bytes(ocr_samples.render(["Cars parked after eight in the evening are towed away."]))
    result = await harness.ingest(KB, "photo.png", png)
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    title = rows(await api(page, "/kb", kb_id=KB))[result.document_id]["title"]
    assert re.fullmatch(r"IMAGE file, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", title), title


def test_records_stored_before_names_existed_still_load():
    old = {"v": 1, "file_id": "f", "format": "text", "parents": [],
           "chunks": [["c1", 0, "hello", "", None, None]]}
    record = FileRecord.from_bytes(zlib.compress(json.dumps(old).encode()))
    assert record.name == "" and record.chunks[0].text == "hello"
    again = FileRecord.from_bytes(FileRecord(record.file_id, record.format, record.chunks, name="Doc").to_bytes())
    assert again.name == "Doc" and again.chunks[0].document_name == "Doc"
    assert record.upload_key == "" and again.upload_key == ""


# ---------------------------------------------------------------------- the Page as LangBot loads it
def test_the_page_is_discovered_and_served_where_langbot_looks():
    from langbot_plugin.api.definition.components.manifest import ComponentManifest
    from langbot_plugin.cli.utils.page_components import populate_plugin_pages

    manifest = yaml.safe_load((ROOT / "manifest.yaml").read_text(encoding="utf-8"))
    plugin = ComponentManifest(owner="test", manifest=manifest, rel_path="manifest.yaml")
    directory = manifest["spec"]["components"]["Page"]["fromDirs"][0]["path"]
    rel = directory + "console.yaml"
    page = ComponentManifest(owner="test", manifest=yaml.safe_load((ROOT / rel).read_text(encoding="utf-8")), rel_path=rel)
    populate_plugin_pages(plugin, [page])
    [entry] = plugin.manifest["spec"]["pages"]
    # LangBot serves page assets only under components/pages/ (pkg/api/http/controller/groups/plugins.py)
    assert entry["id"] == "console" and entry["path"] == "components/pages/console/console.html"
    assert (ROOT / entry["path"]).is_file()
    assert {"en_US", "zh_Hans"} <= set(entry["label"])
    assert page.execution is not None and (ROOT / directory / page.execution.python.path).is_file()


def test_the_html_is_self_contained_and_translated():
    html = (ROOT / "components/pages/console/console.html").read_text(encoding="utf-8")
    # LangBot loads the page as a blob: URL and rewrites only this exact tag to an absolute URL.
    assert '<script src="/api/v1/plugins/_sdk/page-sdk.js"></script>' in html
    assert not re.search(r'(src|href)="(?!/api/v1/plugins/_sdk/)[^"#]', html)
    blocks = dict(re.findall(r"\n    (en_US|zh_Hans): \{(.*?)\n    \}", html, re.S))
    keys = {lang: set(re.findall(r"(\w+): ['\"]", body)) for lang, body in blocks.items()}
    assert keys["en_US"] and keys["en_US"] == keys["zh_Hans"]
    used = set(re.findall(r'data-i18n="(\w+)"', html)) | set(re.findall(r"\bt\('(\w+)'[,)]", html))
    assert used <= keys["en_US"], used - keys["en_US"]


def test_the_page_without_a_kb_names_the_button_langbot_shows_as_the_readmes_do():
    """LangBot 4.11.2's sidebar creates a knowledge base with the + beside Knowledge (no "New")."""
    html = (ROOT / "components/pages/console/console.html").read_text(encoding="utf-8")
    blocks = dict(re.findall(r"\n    (en_US|zh_Hans): \{(.*?)\n    \}", html, re.S))
    path = {"en_US": ("Knowledge → +", ROOT / "README.md"), "zh_Hans": ("知识库 → +", ROOT / "readme/README_zh_Hans.md")}
    for lang, (where, readme) in path.items():
        assert f"**{where}**" in readme.read_text(encoding="utf-8")
        [no_kbs] = re.findall(r"noKbs: '([^']*)'", blocks[lang])
        assert where in no_kbs, (lang, no_kbs)
    assert "Knowledge → +" in re.search(r'data-i18n="noKbs">([^<]*)<', html).group(1)


def test_every_advice_the_backend_gives_is_translated_on_the_page():
    from lucidrag import console

    html = (ROOT / "components/pages/console/console.html").read_text(encoding="utf-8")
    blocks = dict(re.findall(r"\n    (en_US|zh_Hans): \{(.*?)\n    \}", html, re.S))
    advice_keys = {key for _, key, _ in console._ADVICE} | {"default", "interrupted", "unsaved"}
    for lang, body in blocks.items():
        missing = [k for k in advice_keys if f"advice_{k}:" not in body]
        assert not missing, (lang, missing)
    assert console.advice_for("This PDF is encrypted/password-protected.")[0] == "encrypted"


async def test_rebuild_from_the_vector_db_brings_back_a_kb_that_storage_lost(harness: Harness, host, page):
    await create_kb(harness, host)
    result = await harness.ingest(KB, "a.txt", SOLAR)
    for key in [k for k in host.storage if "/file/" in k]:
        del host.storage[key]  # records lost
    fresh = ConsoleHost()
    fresh.collections, fresh.dims, fresh.storage, fresh.workspace_kbs = host.collections, host.dims, host.storage, host.workspace_kbs
    page2 = LucidRagConsole()
    page2.plugin = fresh  # type: ignore[assignment]
    assert await api(page2, "/repair", kb_id=KB, action="rebuild_from_vector_db") == {"files": 1, "chunks": 1, "complete": True}
    assert result.document_id in rows(await api(page2, "/kb", kb_id=KB))


async def test_rebuild_from_the_vector_db_never_makes_a_record_worse_on_a_backend_that_drops_metadata(monkeypatch):
    """Milvus and pgvector keep only text and file_id: what the vectors give back lacks headings,
    pages, parents, the file's name and format. A rebuild keeps them from the stored record."""
    monkeypatch.setattr("lucidrag.vectors.vectorscan.LIST_PAGE", 4)  # a KB of several listing pages
    host = ConsoleHost.milvus()
    harness, page = Harness(host), LucidRagConsole()
    page.plugin = host  # type: ignore[assignment]
    await create_kb(harness, host)
    manual = b"# Pump maintenance\n\n## Seals\n\n" + b"Replace the seal of pump P-7 every 900 hours. " * 30 + \
        b"\n\n## Bearings\n\n" + b"Grease the bearings of pump P-7 with lithium grease monthly. " * 30
    result = await harness.ingest(KB, "pump.md", manual, settings={"chunk_size": 256, "chunk_overlap": 0})
    key = file_record_key(KB, result.document_id)
    before = FileRecord.from_bytes(host.storage[key][1:])
    assert before.name and all(c.heading for c in before.chunks)

    assert (await api(page, "/repair", kb_id=KB, action="rebuild_from_vector_db"))["complete"]

    after = FileRecord.from_bytes(host.storage[key][1:])
    assert after == before
    preview = await api(page, "/chunks", kb_id=KB, file_id=result.document_id)
    assert [c["heading"] for c in preview["chunks"]] == [c.heading for c in before.chunks]
    assert rows(await api(page, "/kb", kb_id=KB))[result.document_id]["title"] == before.name


def restarted_console(host: ConsoleHost) -> tuple[Harness, LucidRagConsole, ConsoleHost]:
    """A new plugin process (engine and console) over the same LangBot host."""
    fresh = ConsoleHost()
    fresh.collections, fresh.dims, fresh.storage, fresh.workspace_kbs = host.collections, host.dims, host.storage, host.workspace_kbs
    page = LucidRagConsole()
    page.plugin = fresh  # type: ignore[assignment]
    return Harness(fresh), page, fresh


async def test_a_file_being_uploaded_is_shown_as_uploading_and_cannot_be_removed(harness: Harness, host, page):
    await create_kb(harness, host)
    await harness.ingest(KB, "a.txt", SOLAR)
    await api(page, "/kb", kb_id=KB)
    gate, written = asyncio.Event(), asyncio.Event()
    real = host.vector_upsert

    async def slow_upsert(*args: Any, **kwargs: Any) -> None:
        await real(*args, **kwargs)
        written.set()
        await gate.wait()  # the upload is still running while the operator looks at the console

    host.vector_upsert = slow_upsert  # type: ignore[method-assign]
    upload = asyncio.create_task(harness.ingest(KB, "tea.txt", TEA, document_id="uploading"))
    await written.wait()

    detail = await api(page, "/kb", kb_id=KB)
    assert rows(detail)["uploading"]["status"] == "ingesting" and detail["health"]["interrupted_files"] == []
    assert (await api(page, "/overview"))["knowledge_bases"][0]["interrupted"] == 0
    assert (await api(page, "/scan", kb_id=KB))["orphans"] == []
    refused = await api(page, "/repair", kb_id=KB, action="remove_orphan_vectors", file_id="uploading")
    assert "being uploaded" in refused["error"] and host.vectors_of(KB, "uploading")

    gate.set()
    assert (await upload).status == DocumentStatus.COMPLETED
    assert "Tieguanyin" in " ".join(await harness.texts(KB, "Tieguanyin cultivar", settings={"search_mode": "keyword"}))


async def test_a_deleted_file_whose_record_storage_kept_is_not_shown_as_interrupted(harness: Harness, host, page):
    await create_kb(harness, host)
    await harness.ingest(KB, "tea.txt", TEA)
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    host.fail("delete_plugin_storage", when=lambda key, **_: "/file/" in key)
    assert await harness.component.delete_document(KB, solar.document_id)  # its journal entry says so
    assert (await api(page, "/kb", kb_id=KB))["health"]["interrupted_files"] == []
    assert (await api(page, "/overview"))["knowledge_bases"][0]["interrupted"] == 0


async def test_a_file_completed_with_an_unanswered_write_is_not_shown_as_interrupted(harness: Harness, host, page):
    """An upload COMPLETED although an upsert of it lost its answer: LangBot may still do it, so the
    file's journal entry stays for the next process (which adopts the file, and waits for that
    write before an upload of the id). It is no interrupted upload."""
    await create_kb(harness, host)
    real, lost = host.vector_upsert, []

    async def upsert(*args: Any, **kwargs: Any) -> Any:
        if not lost:
            lost.append(True)
            await real(*args, **kwargs)  # LangBot did it; the answer never came
            raise ActionCallTimeoutError("vector_upsert: the action call timed out")
        return await real(*args, **kwargs)

    host.vector_upsert = upsert  # type: ignore[method-assign]
    solar = await harness.ingest(KB, "solar.txt", SOLAR)
    assert solar.status == DocumentStatus.COMPLETED and lost
    assert journal_key(KB, solar.document_id) in host.storage, "kept for the next process"
    assert (await api(page, "/kb", kb_id=KB))["health"]["interrupted_files"] == []
    assert (await api(page, "/overview"))["knowledge_bases"][0]["interrupted"] == 0


async def test_files_not_found_yet_after_storage_was_lost_are_never_offered_as_orphans(harness: Harness, host,
                                                                                     monkeypatch):
    await create_kb(harness, host)
    solar = await harness.ingest(KB, "a.txt", SOLAR)
    for key in [k for k in host.storage if "/file/" in k or "/kw/" in k or k.endswith("/meta")]:
        del host.storage[key]  # storage lost: files are found again in the vector DB
    monkeypatch.setattr("lucidrag.state.kbload.FIRST_LOAD_BUDGET_S", 0.0)  # ... and not found yet
    _, page2, _ = restarted_console(host)

    assert (await api(page2, "/scan", kb_id=KB))["orphans"] == []
    refused = await api(page2, "/repair", kb_id=KB, action="remove_orphan_vectors", file_id=solar.document_id)
    assert "still finding" in refused["error"]
    assert host.vectors_of(KB, solar.document_id)


async def test_an_upload_a_crash_cut_off_shows_as_failed_once_the_restart_removed_it(harness: Harness, host):
    """The restarted plugin removes what the cut-off upload wrote; the file list says it failed
    (not deleted, not interrupted): it has to be uploaded again."""
    from tests.test_state_runtime import KB as kb
    from tests.test_state_runtime import crash_during_upsert, long_text

    await create_kb(harness, host, kb_id=kb)
    await harness.ingest(kb, "a.txt", SOLAR)
    crashed = await crash_during_upsert(harness, long_text(400))
    host.faults.clear()
    back, page2, _ = restarted_console(host)
    await back.retrieve(kb, "solar")  # its upkeep settles the journal entry
    assert host.vectors_of(kb, crashed) == [] and journal_key(kb, crashed) not in host.storage
    row = rows(await api(page2, "/kb", kb_id=kb))[crashed]
    assert row["status"] == "failed" and row["advice_key"] == "cut_off"


async def test_a_file_adopted_after_a_crash_that_langbot_shows_interrupted_can_be_removed_here(harness: Harness, host):
    """kill -9 after the last vector was written: LangBot marks the file interrupted for good and
    refuses to delete it; the restarted plugin adopts it (it is complete and searchable). The
    console is the one place it can be deleted."""
    from tests.test_state_runtime import Crash

    await create_kb(harness, host)
    await harness.ingest(KB, "a.txt", SOLAR)
    host.fail("set_plugin_storage", when=lambda key: "/file/" in key, error=Crash())
    with pytest.raises(Crash):
        await harness.ingest(KB, "tea.txt", TEA, document_id="adopted")
    host.faults.clear()
    back, page2, _ = restarted_console(host)
    assert any("Tieguanyin" in t for t in await back.texts(KB, "Tieguanyin cultivar", settings={"search_mode": "keyword"}))
    assert journal_key(KB, "adopted") not in host.storage  # adopted: nothing says "interrupted" any more
    assert rows(await api(page2, "/kb", kb_id=KB))["adopted"]["status"] == "ready"

    refused = await api(page2, "/repair", kb_id=KB, action="remove_orphan_vectors", file_id="adopted")
    assert "delete it in LangBot" in refused["error"] and host.vectors_of(KB, "adopted")
    removed = await api(page2, "/repair", kb_id=KB, action="remove_orphan_vectors", file_id="adopted",
                        langbot_status="interrupted")
    assert removed == {"removed": "adopted"}
    assert host.vectors_of(KB, "adopted") == [] and file_record_key(KB, "adopted") not in host.storage
    assert not any("Tieguanyin" in t for t in await back.texts(KB, "Tieguanyin cultivar", settings={"search_mode": "keyword"}))


# ---------------------------------------------------------------------- a console a newcomer can trust
def langbot_keys(host: ConsoleHost) -> dict[str, str]:
    """LangBot's storage key of each upload (the name its file list shows), by extension."""
    return {path.rsplit(".", 1)[-1]: path.rsplit("/", 1)[-1] for path in host.files}


async def test_every_file_row_names_langbots_storage_key_also_after_a_restart(harness: Harness, host, page):
    await create_kb(harness, host)
    text = await harness.ingest(KB, "solar.txt", SOLAR)
    docx = await harness.ingest(KB, "g.docx", samples.docx_bytes())
    failed = await harness.ingest(KB, "locked.pdf", samples.encrypted_pdf_bytes())
    keys = langbot_keys(host)
    expected = {text.document_id: keys["txt"], docx.document_id: keys["docx"], failed.document_id: keys["pdf"]}
    assert {fid: r["langbot_file"] for fid, r in rows(await api(page, "/kb", kb_id=KB)).items()} == expected
    _, page2, _ = restarted_console(host)  # the key is kept in plugin storage, not only in memory
    assert {fid: r["langbot_file"] for fid, r in rows(await api(page2, "/kb", kb_id=KB)).items()} == expected


def test_the_file_filter_matches_langbots_storage_key():
    html = (ROOT / "components/pages/console/console.html").read_text(encoding="utf-8")
    matched = re.search(r"function fileText\(f\) \{(.*?)\n  \}", html, re.S)
    assert matched and "f.langbot_file" in matched.group(1) and "f.title" in matched.group(1)
    assert 'data-testid="files-filter"' in html and "renderFiles(state.detail.files)" in html


async def test_healthy_rows_offer_no_removal_only_rows_langbot_cannot_delete_do(harness: Harness, host, page):
    await create_kb(harness, host)
    ready = await harness.ingest(KB, "a.txt", SOLAR)
    failed = await harness.ingest(KB, "locked.pdf", samples.encrypted_pdf_bytes())
    stuck = str(uuid.uuid4())
    host.storage[journal_key(KB, stuck)] = b"{}"
    await host.vector_upsert(KB, [[0.1] * 64], [str(uuid.uuid4())], [{"file_id": stuck, "text": "half"}])
    files = rows(await api(page, "/kb", kb_id=KB))
    assert {fid: r["removal"] for fid, r in files.items()} == {ready.document_id: "", failed.document_id: "",
                                                               stuck: "interrupted"}
    html = (ROOT / "components/pages/console/console.html").read_text(encoding="utf-8")
    render = re.search(r"function renderFiles\(files\) \{(.*?)\n  \}", html, re.S)
    assert render and "f.removal === 'interrupted'" in render.group(1)
    assert "f.status === 'ready'" not in render.group(1)  # no removal button on a healthy row


def test_a_removal_is_confirmed_inline_naming_the_file_and_what_stays_in_langbot():
    html = (ROOT / "components/pages/console/console.html").read_text(encoding="utf-8")
    assert not re.search(r"(^|[^\w])confirm\(", html)  # no modals in LangBot's iframe
    blocks = dict(re.findall(r"\n    (en_US|zh_Hans): \{(.*?)\n    \}", html, re.S))
    for lang, stays in (("en_US", "entry for the file stays"), ("zh_Hans", "文件条目仍留在")):
        text = re.search(r"confirmInterrupted: '([^']*)'", blocks[lang]).group(1)
        assert "{name}" in text and "{key}" in text and stays in text, lang
        assert "{name}" in re.search(r"confirmOrphan: '([^']*)'", blocks[lang]).group(1)
    # the button only opens the confirmation; the removal runs from its "Remove" button
    button = re.search(r"function removeButton\(.*?\n  \}", html, re.S).group(0)
    assert "askToConfirm(" in button and "call(" not in button


async def test_settings_show_labels_in_both_languages_and_the_model_by_its_id(harness: Harness, host, page):
    await create_kb(harness, host, chunking="parent_child")
    settings = (await api(page, "/kb", kb_id=KB))["settings"]
    labels = settings["labels"]
    assert labels["chunking"]["label"] == {**labels["chunking"]["label"], "en_US": "Chunking", "zh_Hans": "分块方式"}
    assert labels["chunking"]["value_label"]["en_US"] == "Parent-child"
    assert labels["chunk_size"]["label"]["zh_Hans"] == "分块大小（字符）"
    assert labels["embedding_model_uuid"]["label"]["en_US"] == "Embedding model"
    assert labels["embedding_model_uuid"]["model_id"] and not labels["chunk_size"]["model_id"]
    assert settings["values"]["embedding_model_uuid"] == MODEL
    html = (ROOT / "components/pages/console/console.html").read_text(encoding="utf-8")
    assert "inLang(about.label)" in html and "t('modelId')" in html
