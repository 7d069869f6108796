"""OCR of scans and pictures on pages rendered at test time: the facts come back by retrieval
with the right page, pictures' text sits where the picture was, and limits fail with a message
that names them."""

from __future__ import annotations

import asyncio
import io
import struct
import zlib

import pytest
from langbot_plugin.api.entities.builtin.rag.models import DocumentStatus

from lucidrag.base import limits
from lucidrag.base.errors import LimitExceeded, ParseError
from lucidrag.ingestion.parsing import parse_file
from lucidrag.ingestion.parsing.ocr import PICTURE_MARK
from lucidrag.ingestion.vision import DESCRIPTION_MARK
from lucidrag.state.records import FileRecord
from tests import ocr_samples
from tests.cjk_font import NO_CJK_FONT, cjk_font
from tests.conftest import Harness
from tests.test_console import ConsoleHost, api, create_kb, rows

pytestmark = pytest.mark.skipif(cjk_font() is None, reason=NO_CJK_FONT)

KB = "kb-ocr"
KEY = "v1/kb/0123456789abcdef"

EN_PAGE_1 = ["Scanned contract", "The warranty period for the pump is 36 months from delivery."]
EN_PAGE_2 = ["Maintenance", "Replace the intake filter every 90 days and log it in form M-12."]
ZH_NOTICE = ["停车场通知", "自下月起，访客车辆须在东门登记，临时停车费为每小时八元。"]


@pytest.fixture
def host() -> ConsoleHost:
    return ConsoleHost()


def _compact(text: str) -> str:
    return "".join(text.split())


async def test_scanned_pdf_facts_come_back_with_their_page(harness: Harness):
    pdf = ocr_samples.scanned_pdf([ocr_samples.render(EN_PAGE_1), ocr_samples.render(EN_PAGE_2)])
    result = await harness.ingest(KB, "contract.pdf", pdf)
    assert result.status == DocumentStatus.COMPLETED, result.error_message

    response = await harness.retrieve(KB, "how often is the intake filter replaced")
    top = response.results[0]
    assert "every 90 days" in top.content[0].text
    assert top.metadata["page"] == 2 and "p. 2" in top.metadata["citation"]
    response = await harness.retrieve(KB, "warranty period of the pump")
    assert "36 months" in response.results[0].content[0].text and response.results[0].metadata["page"] == 1


def test_scanned_pdf_reports_the_pages_read_and_the_confidence():
    pdf = ocr_samples.scanned_pdf([ocr_samples.render(EN_PAGE_1), ocr_samples.render([" "])])
    document = parse_file(pdf, KEY + ".pdf")
    assert document.metadata["ocr_pages"] == "1-2" and document.title == "Scanned contract"
    assert document.metadata["ocr_empty_pages"] == "2"  # the blank page: OCR found nothing
    assert 80 <= document.metadata["ocr_confidence"] <= 100
    # the title line set apart at the top is the heading of the text under it
    assert [(s.headings, s.text) for s in document.sections] == [(("Scanned contract",), EN_PAGE_1[1])]


async def test_console_shows_the_pages_ocr_read_its_confidence_and_pages_without_text(harness: Harness, host):
    from components.pages.console.console import LucidRagConsole

    page = LucidRagConsole()
    page.plugin = host  # type: ignore[assignment]
    await create_kb(harness, host, KB)
    pdf = ocr_samples.scanned_pdf([ocr_samples.render(EN_PAGE_1), ocr_samples.render([" "])])
    result = await harness.ingest(KB, "scan.pdf", pdf)
    ocr = rows(await api(page, "/kb", kb_id=KB))[result.document_id]["ocr"]
    assert ocr["ocr_pages"] == "1-2" and ocr["ocr_empty_pages"] == "2" and ocr["ocr_confidence"] >= 80
    text = await harness.ingest(KB, "plain.txt", b"A text file: OCR has nothing to say about it.")
    assert rows(await api(page, "/kb", kb_id=KB))[text.document_id]["ocr"] == {}


def test_the_ocr_summary_survives_plugin_storage_and_old_records_have_none():
    record = FileRecord("f1", "pdf", [], ocr={"ocr_pages": "1-3", "ocr_confidence": 91})
    assert FileRecord.from_bytes(record.to_bytes()).ocr == {"ocr_pages": "1-3", "ocr_confidence": 91}
    assert FileRecord.from_bytes(FileRecord("f2", "txt", []).to_bytes()).ocr == {}


def test_chinese_picture_upload():
    png = ocr_samples.image_bytes(ocr_samples.render(ZH_NOTICE))
    document = parse_file(png, KEY + ".png")
    assert document.format == "image" and document.title == "停车场通知"  # the heading names the file
    assert document.metadata["ocr_pictures"] == 1
    assert [(s.headings, s.text) for s in document.sections] == [(("停车场通知",), ZH_NOTICE[1])]


def test_sideways_scan_reads_in_order():
    page = ocr_samples.render(EN_PAGE_2 + ["Call extension 4471 when the filter is out of stock."])
    document = parse_file(ocr_samples.image_bytes(page.rotate(90, expand=True)), KEY + ".png")
    text = document.text
    assert document.sections[0].headings == ("Maintenance",)
    assert "every 90 days" in text and "extension 4471" in text
    assert text.index("every 90 days") < text.index("extension 4471")


def test_noisy_phone_photo_of_a_page():
    photo = ocr_samples.photo_like(ocr_samples.render(EN_PAGE_1, dpi=150))
    document = parse_file(ocr_samples.image_bytes(photo, "JPEG", quality=60), KEY + ".jpg")
    assert "36 months from delivery" in document.text


def test_multi_page_tiff_keeps_page_numbers():
    first, second = ocr_samples.render(EN_PAGE_1), ocr_samples.render(EN_PAGE_2)
    tiff = ocr_samples.image_bytes(first, "TIFF", save_all=True, append_images=[second],
                                   compression="tiff_deflate")
    document = parse_file(tiff, KEY + ".tiff")
    pages = {s.page for s in document.sections if "intake filter" in s.text}
    assert pages == {2}
    assert document.metadata["ocr_pages"] == "1-2"


def test_docx_picture_text_sits_between_its_paragraphs():
    picture = ocr_samples.render(["Reset code: press MENU and 7 for five seconds."], width_in=6)
    data = ocr_samples.docx_with_picture("Before the picture: check the power cable.", picture,
                                         "After the picture: call the service desk.")
    document = parse_file(data, KEY + ".docx")
    texts = [s.text for s in document.sections]
    at = next(i for i, t in enumerate(texts) if "Reset code" in t)
    assert texts[at].startswith(PICTURE_MARK)
    assert "power cable" in "".join(texts[:at]) and "service desk" in "".join(texts[at + 1:])
    assert document.sections[at].headings == ("Service notes",)
    assert document.metadata["ocr_pictures"] == 1


async def test_pptx_picture_text_is_found_on_its_slide(harness: Harness):
    picture = ocr_samples.render(["Quarterly target: 4,200 units in the north region."], width_in=6)
    data = ocr_samples.pptx_with_picture(["Agenda", "Sales", "Questions"], picture, on_slide=2)
    result = await harness.ingest(KB, "deck.pptx", data)
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    top = (await harness.retrieve(KB, "quarterly target north region units")).results[0]
    assert "4,200 units" in top.content[0].text and PICTURE_MARK in top.content[0].text
    assert top.metadata["page"] == 2


def test_mixed_pdf_reads_only_the_scanned_page_by_ocr():
    scan = ocr_samples.render(EN_PAGE_2, height_in=11.69)
    data = ocr_samples.mixed_pdf("Page one has a text layer about apples.", scan)
    document = parse_file(data, KEY + ".pdf")
    assert document.metadata["ocr_pages"] == "2"
    by_page = {s.page: s.text for s in document.sections}
    assert "apples" in by_page[1] and "every 90 days" in by_page[2]


def test_a_small_picture_on_a_text_page_is_read_and_marked():
    picture = ocr_samples.render(["Gate code 5813"], width_in=4, point=14)
    data = ocr_samples.mixed_pdf("Visitors: see the picture below.", ocr_samples.render([" "]), picture)
    document = parse_file(data, KEY + ".pdf")
    marked = [s for s in document.sections if s.text.startswith(PICTURE_MARK)]
    assert len(marked) == 1 and "5813" in marked[0].text and marked[0].page == 1
    assert document.metadata["ocr_pictures"] == 1 and document.metadata["ocr_empty_pages"] == "2"


# ---------------------------------------------------------------------------------------------
# Limits: no pixel is decoded and no page read before the file fails


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG that claims width × height (a decompression bomb's header) with one tiny IDAT."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


@pytest.mark.parametrize("width, height", [(20_000, 20_000), (9_000, 9_000)])
def test_huge_picture_fails_naming_the_limit(width, height):
    with pytest.raises(LimitExceeded, match=r"too large to read.*MAX_IMAGE_PIXELS"):
        parse_file(_png_header_only(width, height), KEY + ".png")


def test_long_scan_fails_naming_the_page_limit(monkeypatch):
    monkeypatch.setattr(limits, "MAX_OCR_PAGES", 2)
    blank = ocr_samples.render([" "], dpi=30)
    with pytest.raises(LimitExceeded, match=r"3 scanned pages.*at most 2.*MAX_OCR_PAGES"):
        parse_file(ocr_samples.scanned_pdf([blank] * 3, dpi=30), KEY + ".pdf")
    tiff = ocr_samples.image_bytes(blank, "TIFF", save_all=True, append_images=[blank, blank])
    with pytest.raises(LimitExceeded, match=r"more than 2 pages.*at most 2.*MAX_OCR_PAGES"):
        parse_file(tiff, KEY + ".tif")


def test_pictures_past_the_per_file_limit_are_skipped_and_counted(monkeypatch):
    monkeypatch.setattr(limits, "MAX_PICTURES_PER_FILE", 0)
    picture = ocr_samples.render(["Reset code: press MENU and 7."], width_in=6)
    document = parse_file(ocr_samples.docx_with_picture("Some text.", picture, "More text."), KEY + ".docx")
    assert "Reset code" not in document.text
    assert document.metadata["ocr_pictures_skipped"] == 1


def test_picture_without_text_fails_with_a_reason():
    from PIL import Image

    blank = ocr_samples.image_bytes(Image.new("RGB", (400, 300), "white"))
    with pytest.raises(ParseError, match=r"OCR found no text in this \.png picture"):
        parse_file(blank, KEY + ".png")


# ---------------------------------------------------------------------------------------------
# Optional vision model: pictures without text get a description; its failure never fails a file


def _bar_chart():  # noqa: ANN202 - a picture with no text in it
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (480, 320), "white")
    draw = ImageDraw.Draw(image)
    for i, height in enumerate((60, 110, 170, 240)):
        draw.rectangle((60 + i * 100, 300 - height, 130 + i * 100, 300), fill=(40, 90, 200))
    return image


def _docx_with_charts(count: int) -> bytes:
    import docx
    from docx.shared import Inches

    document = docx.Document()
    document.add_heading("Sales review", level=1)
    document.add_paragraph("Monthly figures for the northern stores follow.")
    for _ in range(count):
        document.add_picture(io.BytesIO(ocr_samples.image_bytes(_bar_chart())), width=Inches(4))
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


async def test_vision_model_describes_a_picture_without_text_where_it_was(harness: Harness, host):
    seen: list = []

    def llm(messages):
        seen.append(messages)
        return "A bar chart: sales rising in each of four months."
    host.llm_fn = llm
    result = await harness.ingest(KB, "sales.docx", _docx_with_charts(1),
                                  settings={"vision_model_uuid": "vision-1"})
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    top = (await harness.retrieve(KB, "bar chart sales rising", creation={"vision_model_uuid": "vision-1"})).results[0]
    assert top.content[0].text.count(DESCRIPTION_MARK) == 1 and "four months" in top.content[0].text
    assert top.metadata["heading"] == "Sales review"
    image = seen[0][0].content[1]
    assert image.type == "image_base64" and image.image_base64.startswith("data:image/png;base64,")


async def test_without_a_vision_model_nothing_is_sent_and_no_placeholder_is_indexed(harness: Harness, host):
    host.llm_fn = lambda messages: "should not be asked"
    result = await harness.ingest(KB, "sales.docx", _docx_with_charts(1))
    assert result.status == DocumentStatus.COMPLETED
    assert host.calls["invoke_llm"] == 0
    assert not any("[Picture]" in t for t in await harness.texts(KB, "Picture"))


async def test_a_failing_or_slow_vision_model_never_fails_the_file_and_is_bounded(harness: Harness, host, monkeypatch):
    monkeypatch.setattr(limits, "MAX_VISION_PICTURES", 2)
    monkeypatch.setattr(limits, "VISION_CALL_S", 0.2)
    result = await harness.ingest(KB, "a.docx", _docx_with_charts(3), settings={"vision_model_uuid": "gone"})
    assert result.status == DocumentStatus.COMPLETED, result.error_message  # llm_fn None: model not found
    assert host.calls["invoke_llm"] == 2  # the third picture is past the per-file count

    async def slow_model(**kwargs):
        await asyncio.sleep(5)  # past VISION_CALL_S
        return "late"
    monkeypatch.setattr(host, "invoke_llm", slow_model)
    result = await harness.ingest(KB, "b.docx", _docx_with_charts(1), settings={"vision_model_uuid": "slow"})
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    assert not any("late" in t for t in await harness.texts(KB, "late"))
