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
    # was: markdown-it tokenised all 12 MB first, then the characters limit refused it
    data = h.zip_of("notes.md", h.markdown_paragraphs(12))
    failed_naming(run_ingest(data, "notes.zip"), "MAX_DOCUMENT_CHARS", "before parsing, markup included")


def test_an_html_page_of_more_tags_than_the_limit_fails_before_the_tree_is_built():
    # was: BeautifulSoup + markdownify held ~1.6 KB per tag (+592 MB for 360,000 tags)
    error = failed_naming(run_ingest(h.html_many_tags(9.5), "page.html"), "MAX_HTML_TAGS")
    assert "save it as text or PDF" in error
