"""A hostile corpus, generated at test time: files built to inflate, allocate or stall while they are
read. Each runs the real ingest (tests/conftest.py's Harness, the fake host) in a child process
capped at 4 GiB of address space (tests/ingest_child.py), and the test asserts the verdict, the
reason (it names the limit of lucidrag/base/limits.py that refused the file) and the memory: peak
RSS at most 512 MiB over the child's idle (every reader imported). The two kinds that need the
worker pool rather than a limit, a reader that hangs and a reader that aborts, are in
tests/test_parse_workers.py."""

from __future__ import annotations

import re

import pytest

from lucidrag.base import limits
from tests import hostile_files as h
from tests.ingest_child import run_ingest

MEMORY_MB = 512  # growth over idle allowed to any one upload (docs/BENCHMARKS.md → "Hostile files")


def failed_naming(result: dict, *phrases: str) -> str:
    assert result["status"] == "failed", result
    assert result["vectors"] == 0
    for phrase in phrases:
        assert phrase in result["error"], result["error"]
    assert result["grew_mb"] <= MEMORY_MB, result
    return result["error"]


# ---------------------------------------------------------------------------------------------
# Office files: every part counted, media included


@pytest.mark.parametrize("name,make", [("report.docx", h.docx_media_bomb), ("slides.pptx", h.pptx_media_bomb)],
                         ids=["docx", "pptx"])
def test_an_office_file_whose_picture_inflates_400_mb_fails_before_the_picture_is_read(name: str, make):
    # was: python-docx / python-pptx read the 400 MB part whole (+800 MB) and the file ingested
    error = failed_naming(run_ingest(make(400), name), "pictures and every other part")
    assert re.search(r"unpacks to 40\d\.\d MB", error) and "save it again or split it" in error


# ---------------------------------------------------------------------------------------------
# Spreadsheets: the dense grid calamine would allocate, counted from the sheet's XML


def test_a_5kb_xlsx_with_a_value_at_xfd1048576_fails_with_the_grid_it_would_allocate():
    # was: calamine allocated 16,384 × 1,048,576 cells and the process aborted (SIGABRT)
    error = failed_naming(run_ingest(h.xlsx_sparse("XFD1048576"), "prices.xlsx"), "MAX_SHEET_CELLS")
    assert "“Prices”" in error and "17.2 billion cells (16,384 columns × 1,048,576 rows, A1:XFD1048576)" in error
    assert f"at most {limits.MAX_SHEET_CELLS:,} cells" in error and "Ctrl+End" in error


def test_a_stray_value_written_without_excels_layout_is_found_by_the_exact_walk():
    # `r` after another attribute and a row without a number: calamine places them all the same
    error = failed_naming(run_ingest(h.xlsx_sparse_unusual_xml("XFD1048576"), "prices.xlsx"), "MAX_SHEET_CELLS")
    assert "16,384 columns" in error


# ---------------------------------------------------------------------------------------------
# PDF: pages × content before PDFium runs it


def test_a_10kb_pdf_whose_pages_share_one_heavy_stream_fails_before_extraction():
    # was: ~1.5 s of PDFium per page, the file ingested after ~12 s (r03: and held the parse lane)
    error = failed_naming(run_ingest(h.pdf_shared_content(8, 100_000), "shared.pdf"), "PDF_MAX_CONTENT_RATIO",
                          "content shared between pages counts on every page")
    assert "split it" in error


def test_a_pdf_of_more_pages_than_the_limit_fails_naming_it():
    error = failed_naming(run_ingest(h.pdf_many_pages(limits.MAX_PDF_PAGES + 1000), "pages.pdf"), "MAX_PDF_PAGES")
    assert f"has {limits.MAX_PDF_PAGES + 1000:,} pages" in error


# ---------------------------------------------------------------------------------------------
# Text formats and archives: by size before parsing


def test_a_zip_holding_a_44_mb_json_is_refused_by_the_members_size_before_it_is_read():
    # was: the member was parsed whole (27 s, +579 MB) before the characters limit refused it
    data = h.zip_of("catalogue.json", h.json_records(44))
    failed_naming(run_ingest(data, "catalogue.zip"), "catalogue.json", "ZIP_MAX_MEMBER_BYTES")


def test_a_text_member_past_the_characters_limit_fails_before_it_is_parsed():
    # was: markdown-it tokenised all 14 MB first, then the characters limit refused it
    data = h.zip_of("notes.md", h.markdown_paragraphs(14))
    failed_naming(run_ingest(data, "notes.zip"), "MAX_DOCUMENT_CHARS", "before parsing, markup included")


def test_an_html_page_of_more_tags_than_the_limit_fails_before_the_tree_is_built():
    # was: BeautifulSoup + markdownify held ~1.6 KB per tag (+592 MB for 360,000 tags)
    error = failed_naming(run_ingest(h.html_many_tags(9.5), "page.html"), "MAX_HTML_TAGS")
    assert "save it as text or PDF" in error


def test_an_ods_whose_repeated_row_of_repeated_cells_spans_16_million_cells_fails_first():
    # was: calamine expanded the repeats as it opened the file: +1 GB
    error = failed_naming(run_ingest(h.ods_repeated(1_000, 16_384), "prices.ods"), "MAX_SHEET_CELLS", "“Prices”")
    assert "16.4 million cells (16,384 columns × 1,001 rows, A1:XFD1001)" in error


@pytest.mark.parametrize("name,make,part", [
    ("prices.xlsx", h.xlsx_lying_sheet, "xl/worksheets/sheet1.xml"),
    ("report.docx", h.docx_lying_picture, "word/media/"),
], ids=["xlsx-sheet", "docx-picture"])
def test_an_office_part_that_unpacks_past_its_declared_size_fails_as_damaged_naming_it(name: str, make, part: str):
    # 300 MB in a part that declares 1 KB: never read past what it declares
    error = failed_naming(run_ingest(make(), name), f"its part {part}", "cannot be unpacked")
    assert "save it again" in error


def test_a_docx_of_five_million_empty_paragraphs_fails_by_its_elements_before_python_docx_holds_them():
    # was: 30 MB of XML inside the 100× ratio, +640 MB and minutes in python-docx
    failed_naming(run_ingest(h.docx_empty_paragraphs(5_000_000), "memo.docx"), "OFFICE_MAX_XML_ELEMENTS",
                  f"more than {limits.OFFICE_MAX_XML_ELEMENTS:,} XML elements")


# ---------------------------------------------------------------------------------------------
# Pictures: from the header, before decoding


def test_a_transparent_png_of_59_megapixels_fails_before_it_is_decoded():
    # was: decoded (240 MB), copied, premultiplied for scaling: +804 MB, then "OCR found no text"
    error = failed_naming(run_ingest(h.png_pixels(7700, 7700, "RGBA"), "poster.png"), "MAX_IMAGE_PIXELS",
                          "7,700 × 7,700, with transparency")
    assert "30 with transparency" in error


def test_a_59_megapixel_photo_is_decoded_at_the_scale_ocr_reads():
    # was: decoded whole (177 MB), then copied by exif_transpose before scaling
    result = run_ingest(h.jpeg_pixels(7700, 7700), "photo.jpg", warm_ocr=True)
    failed_naming(result, "OCR found no text")  # a blank photo: read, and nothing found


def test_a_200_inch_scanned_pdf_page_is_rendered_at_the_size_ocr_reads():
    # was: rendered at 60 megapixels for OCR to scale down to 3,000 px: +533 MB
    result = run_ingest(h.pdf_poster_page(14_400), "poster.pdf", warm_ocr=True)
    failed_naming(result, "No text found in this PDF")  # an empty page: rendered, read, nothing found


def test_a_tiff_of_more_pages_than_the_ocr_limit_fails_without_walking_every_page():
    error = failed_naming(run_ingest(h.tiff_pages(limits.MAX_OCR_PAGES * 3), "scan.tif"), "MAX_OCR_PAGES")
    assert f"more than {limits.MAX_OCR_PAGES} pages" in error


# ---------------------------------------------------------------------------------------------
# Deep nesting


def test_fifty_thousand_nested_divs_ingest_their_text():
    # was: "Could not read this .html file (RecursionError)" from the Markdown converter
    result = run_ingest(h.deep_html(50_000), "deep.html")
    assert result["status"] == "completed", result
    assert result["vectors"] >= 1 and result["grew_mb"] <= MEMORY_MB


def test_a_json_list_of_2_4_million_numbers_fails_at_the_characters_limit_while_flattened():
    # was: 2.4 million Sections built (+770 MiB), then refused
    failed_naming(run_ingest(h.json_flat_numbers(2_400_000), "numbers.json"), "more than 10,000,000 characters")


def test_400_000_markdown_headings_ingest_with_markdown_it_given_segments():
    # was: markdown-it's tokens of the whole 4.9 MB at once, +700 MiB
    result = run_ingest(h.bare_headings_markdown(400_000), "headings.md")
    assert result["status"] == "completed", result
    assert result["vectors"] >= 1 and result["grew_mb"] <= MEMORY_MB, result


def test_json_nested_past_the_readers_recursion_fails_saying_how_deep():
    result = run_ingest(h.deep_json(100_000), "deep.json")
    failed_naming(result, "levels deep", "recursion limit", "Flatten the deepest parts")


# ---------------------------------------------------------------------------------------------
# Text past the characters limit, before parsing


@pytest.mark.parametrize("fmt", ["txt", "csv", "jsonl", "html"])
def test_a_text_file_past_the_characters_limit_fails_before_its_parser_runs(fmt: str):
    # was: parsed whole (CSV rows, JSON lines, a BeautifulSoup tree), then refused
    data = h.text_of_chars(int(limits.MAX_DOCUMENT_CHARS * limits.TEXT_MARKUP_ALLOWANCE) + 200_000, fmt)
    error = failed_naming(run_ingest(data, f"notes.{fmt}"), "MAX_DOCUMENT_CHARS", "before parsing, markup included")
    assert f"has {len(data):,} characters before parsing" in error


def test_a_zip_in_a_zip_holding_a_43_mb_json_is_refused_by_the_inner_members_size():
    data = h.zip_of("inner.zip", h.zip_of("catalogue.json", h.json_records(44)))
    failed_naming(run_ingest(data, "outer.zip"), "catalogue.json", "ZIP_MAX_MEMBER_BYTES")
