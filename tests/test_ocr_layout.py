"""Scans read the way a person reads them: pages laid out at test time (tests/ocr_samples.py) come
back with their columns in order, their tables as tables, their words and headings intact. The
first tests are pure geometry on made-up boxes (no OCR); the rest read rendered pages."""

from __future__ import annotations

import pytest
from langbot_plugin.api.entities.builtin.rag.models import DocumentStatus

from lucidrag.ingestion.parsing import parse_file
from lucidrag.ingestion.parsing.ocr_layout import OcrLine, join_text, page_lines, read_page
from tests import ocr_samples
from tests.cjk_font import NO_CJK_FONT, cjk_font
from tests.conftest import Harness

KEY = "v1/kb/0123456789abcdef"
needs_font = pytest.mark.skipif(cjk_font() is None, reason=NO_CJK_FONT)


def _line(text: str, left: float, top: float, right: float, height: float = 30) -> OcrLine:
    return OcrLine(text, 1.0, (left, top, right, top + height))


def _in_order(text: str, sentences: list[str]) -> bool:
    """Every sentence is in `text` whole, and they come in this order."""
    at = [text.find(s) for s in sentences]
    return -1 not in at and at == sorted(at)


# ---------------------------------------------------------------------------------------------
# Geometry


def test_three_columns_under_a_title_and_over_a_footer_read_column_by_column():
    lines = [_line("Quarterly report", 100, 50, 700, height=50)]
    for column, x in enumerate((100, 420, 740)):
        for row in range(3):
            lines.append(_line(f"column {column} line {row} of running text here", x, 150 + 40 * row, x + 290))
    lines.append(_line("Page footer line spanning the page", 100, 400, 1030))
    blocks = read_page(lines)
    assert blocks[0].kind == "heading" and blocks[0].text == "Quarterly report"
    assert [b.text for b in blocks[1:]] == [
        " ".join(f"column {c} line {r} of running text here" for r in range(3)) for c in range(3)
    ] + ["Page footer line spanning the page"]


def test_words_are_neither_glued_nor_split_across_boxes_and_chinese_gets_no_spaces():
    # the detector's padded boxes of two words touch or overlap: still two words
    row = [_line("for valve", 100, 100, 224), _line("replacement.", 220, 100, 380),
           _line("The pump is", 420, 100, 560), _line("replaced yearly", 560, 100, 770)]
    assert read_page(row)[0].text == "for valve replacement. The pump is replaced yearly"
    assert join_text("保修五年。", "保修期内") == "保修五年。保修期内"
    assert join_text("型号", "KX-2290的") == "型号KX-2290的"
    assert join_text("hyphen-", "ated word") == "hyphenated word"


def test_a_table_whose_header_leaves_the_first_column_empty_keeps_its_columns():
    cells = [("Code", 300, 100), ("Price", 500, 100), ("Valve", 100, 140), ("KV-1", 300, 140), ("4.10", 500, 140),
             ("Tape", 100, 180), ("ST-2", 300, 180), ("1.95", 500, 180)]
    blocks = read_page([_line(text, x, y, x + 60) for text, x, y in cells])
    assert [(b.kind, b.rows) for b in blocks] == [
        ("table", (("", "Code", "Price"), ("Valve", "KV-1", "4.10"), ("Tape", "ST-2", "1.95")))]


def test_running_text_beside_a_short_list_is_read_as_text_then_list():
    prose = ["The plant runs three shifts and the", "night shift has the smallest crew, so",
             "maintenance is planned for the", "weekend whenever that is possible."]
    items = ["Boilers", "Pumps", "Valves", "Filters"]
    lines = [_line(text, 100, 100 + 40 * k, 500) for k, text in enumerate(prose)]
    lines += [_line(text, 600, 100 + 40 * k, 700) for k, text in enumerate(items)]
    blocks = read_page(lines)
    assert [b.kind for b in blocks] == ["text", "text"]
    assert blocks[0].text == " ".join(prose) and blocks[1].text == " ".join(items)


def test_a_line_the_detector_ran_across_a_narrow_gutter_is_cut_at_it():
    left = [f"left column words in line {k}" for k in range(3)]
    right = [f"right column words line {k}" for k in range(3)]
    lines = [_line(left[k], 100, 100 + 40 * k, 400) for k in (0, 2)]
    lines += [_line(right[k], 430, 100 + 40 * k, 715) for k in (0, 2)]
    lines.append(_line(f"{left[1]} {right[1]}", 100, 140, 715))  # one box over both columns
    assert [b.text for b in read_page(lines)] == [" ".join(left), " ".join(right)]


def test_a_full_line_run_across_a_gutter_keeps_its_last_short_words_when_its_columns_other_lines_are_short():
    # WenQuanYi Zen Hei's three-column page: the first line fills its column ("... in the", x 90-418),
    # the column's other lines end at 341-351, the next column starts at 450. Cut halfway between
    # 351 and 450 by character count, "the" went to the next column: "the Two new stores ...".
    lines = [_line("Sales rose by four percent in the Two new stores opened in Leeds", 90, 203, 780, 26),
             _line("north region this quarter.", 90, 237, 341, 26), _line("and in Hull during March.", 450, 237, 703, 26),
             _line("The south region was flat.", 90, 306, 351, 26), _line("Both stores open at eight.", 450, 306, 712, 26)]
    text = " ".join(b.text for b in read_page(lines))
    assert _in_order(text, ["Sales rose by four percent in the north region this quarter.", "The south region was flat.",
                            "Two new stores opened in Leeds and in Hull during March.", "Both stores open at eight."]), text


def test_a_tilted_page_is_turned_upright_before_rows_are_found():
    import math

    angle = math.radians(3)

    def tilted(x: float, y: float, width: float) -> list[tuple[float, float]]:
        corners = [(x, y), (x + width, y), (x + width, y + 30), (x, y + 30)]
        return [(px * math.cos(angle) - py * math.sin(angle), px * math.sin(angle) + py * math.cos(angle))
                for px, py in corners]

    quads = [tilted(100, 100 + 45 * k, 400) for k in range(3)] + [tilted(600, 100 + 45 * k, 400) for k in range(3)]
    texts = [f"left column sentence number {k} goes on" for k in range(3)] + \
        [f"right column sentence number {k} goes on" for k in range(3)]
    lines = page_lines(quads, texts, [1.0] * 6)
    assert all(abs((line.box[3] - line.box[1]) - 30) < 2 for line in lines)  # upright again
    text = "\n".join(b.text for b in read_page(lines))
    assert text.index("left column sentence number 2") < text.index("right column sentence number 0")


# ---------------------------------------------------------------------------------------------
# Rendered pages


def _parse(image, ext: str = ".png"):  # noqa: ANN001, ANN202
    return parse_file(ocr_samples.image_bytes(image), KEY + ext)


BULLETIN_SENTENCES = ocr_samples.BULLETIN_LEFT[1:] + ocr_samples.BULLETIN_RIGHT[1:]


def _bulletin(**options):  # noqa: ANN202
    return ocr_samples.two_columns(ocr_samples.BULLETIN_TITLE, ocr_samples.BULLETIN_LEFT,
                                   ocr_samples.BULLETIN_RIGHT, **options)


@needs_font
def test_two_column_page_reads_column_by_column_under_its_title():
    document = _parse(_bulletin())
    assert document.title == ocr_samples.BULLETIN_TITLE
    assert {s.headings for s in document.sections} == {(ocr_samples.BULLETIN_TITLE,)}
    assert _in_order(document.text, BULLETIN_SENTENCES)


@needs_font
def test_chinese_two_column_page_reads_column_by_column_without_spaces():
    image = ocr_samples.two_columns(ocr_samples.NOTICE_ZH_TITLE, ocr_samples.NOTICE_ZH_LEFT,
                                    ocr_samples.NOTICE_ZH_RIGHT)
    document = _parse(image)
    assert document.sections[0].headings == (ocr_samples.NOTICE_ZH_TITLE,)
    assert document.sections[0].text.split("\n\n") == ocr_samples.NOTICE_ZH_LEFT + ocr_samples.NOTICE_ZH_RIGHT


@needs_font
@pytest.mark.parametrize("ruled", [True, False], ids=["ruled", "without-rules"])
def test_a_picture_of_a_table_becomes_a_markdown_table(ruled):
    document = _parse(ocr_samples.table_page(ocr_samples.PRICE_ROWS, ocr_samples.PRICE_WIDTHS, ruled=ruled))
    tables = [s for s in document.sections if s.is_table]
    assert len(tables) == 1 and tables[0].headings == ("Spare parts price list",)
    lines = tables[0].text.split("\n")
    assert lines[0] == "| Item | Code | Unit | Price (EUR) |"
    assert lines[2:] == ["| " + " | ".join(row) + " |" for row in ocr_samples.PRICE_ROWS[1:]]


@needs_font
def test_a_form_keeps_each_value_with_its_label():
    document = _parse(ocr_samples.form_page())
    assert document.sections[0].headings == ("Service request form",)
    lines = document.sections[0].text.split("\n")
    assert [f"{label}: {value}" for label, value in ocr_samples.FORM_FIELDS] == lines


@needs_font
def test_side_bar_and_caption_are_read_after_the_main_column():
    document = _parse(ocr_samples.sidebar_page())
    paragraphs = document.text.split("\n\n")
    assert paragraphs == ocr_samples.SIDEBAR_MAIN[1:] + [ocr_samples.CAPTION] + ocr_samples.SIDEBAR_BOX
    assert document.sections[0].headings == (ocr_samples.SIDEBAR_MAIN[0],)


@needs_font
def test_three_columns_with_narrow_gutters_read_column_by_column_then_the_footer():
    document = _parse(ocr_samples.newsletter_page())
    assert document.sections[0].headings == (ocr_samples.NEWSLETTER_TITLE,)
    paragraphs = [p for column in ocr_samples.NEWSLETTER_COLUMNS for p in column]
    assert document.text.split("\n\n") == paragraphs + [ocr_samples.NEWSLETTER_FOOTER]


@needs_font
def test_chinese_with_english_names_and_codes_is_written_as_printed():
    document = _parse(ocr_samples.render(ocr_samples.MIXED_ZH))
    assert document.sections[0].headings == (ocr_samples.MIXED_ZH[0],)
    assert document.sections[0].text.split("\n\n") == ocr_samples.MIXED_ZH[1:]


@needs_font
def test_a_tilted_noisy_photo_of_two_columns_reads_in_order():
    photo = ocr_samples.photo_like(_bulletin())
    document = parse_file(ocr_samples.image_bytes(photo, "JPEG", quality=60), KEY + ".jpg")
    assert _in_order(document.text, BULLETIN_SENTENCES)


@needs_font
def test_a_sideways_two_column_scan_reads_in_order():
    document = _parse(_bulletin().rotate(90, expand=True))
    assert document.title == ocr_samples.BULLETIN_TITLE
    assert _in_order(document.text, BULLETIN_SENTENCES)


@needs_font
def test_a_low_resolution_two_column_scan_reads_in_order():
    document = _parse(_bulletin(dpi=80))  # body text ~16 px high
    assert _in_order(document.text, BULLETIN_SENTENCES)


@needs_font
async def test_a_table_continued_on_the_next_scanned_page_keeps_its_header(harness: Harness):
    pdf = ocr_samples.scanned_pdf(ocr_samples.continued_table_pages())
    document = parse_file(pdf, KEY + ".pdf")
    tables = {s.page: s for s in document.sections if s.is_table}
    header = "| Room | Owner | Extension |"
    assert tables[1].text.split("\n")[0] == header and tables[2].text.split("\n")[0] == header
    assert "| B202 | Mailroom | 4520 |" in tables[2].text.split("\n")
    assert tables[2].headings == ("Office directory",)

    result = await harness.ingest("kb-ocr", "directory.pdf", pdf)
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    top = (await harness.retrieve("kb-ocr", "Mailroom extension")).results[0]
    assert header in top.content[0].text and "4520" in top.content[0].text
    assert top.metadata["page"] == 2 and "p. 2" in top.metadata["citation"]


@needs_font
async def test_a_row_found_in_a_long_scanned_table_carries_its_column_names(harness: Harness):
    rows = [ocr_samples.PRICE_ROWS[0]] + [[f"Fitting type {k}", f"FT-{k:02d}", "piece", f"{k}.50"]
                                          for k in range(1, 9)] + [ocr_samples.PRICE_ROWS[2]]
    sheet = ocr_samples.Sheet(height_in=1.6 + 0.3 * len(rows))
    sheet.table(0.8, sheet.text(0.8, 0.6, 6.6, ["Fittings price list"], point=18), rows, ocr_samples.PRICE_WIDTHS)
    result = await harness.ingest("kb-ocr", "prices.png", ocr_samples.image_bytes(sheet.image),
                                  settings={"chunk_size": 128, "chunk_overlap": 0})
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    top = (await harness.retrieve("kb-ocr", "Kestrel valve price", creation={"chunk_size": 128})).results[0]
    text = top.content[0].text
    assert "| Item | Code | Unit | Price (EUR) |" in text and "| Kestrel valve | KV-405 | piece | 41.70 |" in text
    assert "Fittings price list" in top.metadata["heading"]



@needs_font
def test_a_picture_of_a_table_in_a_word_file_is_a_table_where_the_picture_was():
    picture = ocr_samples.table_page(ocr_samples.PRICE_ROWS, ocr_samples.PRICE_WIDTHS)
    data = ocr_samples.docx_with_picture("Prices below are valid from May.", picture, "Orders ship on Fridays.")
    document = parse_file(data, KEY + ".docx")
    texts = [s.text for s in document.sections]
    at = next(i for i, s in enumerate(document.sections) if s.is_table)
    assert texts[at].split("\n")[0] == "| Item | Code | Unit | Price (EUR) |"
    assert "| Kestrel valve | KV-405 | piece | 41.70 |" in texts[at].split("\n")
    assert "valid from May" in "".join(texts[:at]) and "ship on Fridays" in "".join(texts[at + 1:])
    assert document.sections[at].headings == ("Service notes",)
