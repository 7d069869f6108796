"""The numbers README.md gives an operator under "Limits" (the vision model's under "Settings", the
question log's under "Questions asked") are the code's: change a limit and this fails until the README
says the new one (the Chinese README follows through test_readme_parity)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.knowledge_engine.lucid_rag import INGEST_TIMEOUT_S
from lucidrag.agent.kbtools import MAX_NAMED_FILES, NAME_SCAN_FILES
from lucidrag.agent.output import MAX_ANSWER_CHARS, MAX_PASSAGE_CHARS
from lucidrag.agent.params import DEFAULT_LIST_LIMIT, MAX_AROUND, MAX_LIST_LIMIT, MAX_QUERY_CHARS, MAX_TOP_K
from lucidrag.base import limits as L
from lucidrag.base import workers
from lucidrag.base.budget import HOOK_TIMEOUT_S
from lucidrag.base.bookkeeping import LOG_EVERY_S
from lucidrag.console import MAX_LISTED_FILES
from lucidrag.engine import KEYWORD_WAIT_S, QUERY_LOAD_WAIT_S
from lucidrag.state import querylog, recordcache
from lucidrag.state.store import PART_SIZE
from lucidrag.vectors import embedding

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
LIMITS = README.split("\n## Limits", 1)[1].split("\n## ", 1)[0]
SETTINGS = README.split("\n## Settings", 1)[1].split("\n## ", 1)[0]
CONSOLE = README.split("\n### Why did a file fail? The LucidRAG console", 1)[1].split("\n**Questions asked.**", 1)[0]
QUESTIONS = README.split("\n**Questions asked.**", 1)[1].split("\n### ", 1)[0]
MIB = 1 << 20

STATED_IN_LIMITS = [
    f"An ingest is stopped after {INGEST_TIMEOUT_S:,.0f} s (LangBot's own limit is {HOOK_TIMEOUT_S['ingest']:,.0f} s)",
    f"in memory ({embedding.CACHE_BYTES // MIB} MiB per installation",
    f"the most recently used stay cached, {recordcache.CACHE_BYTES // MIB} MiB",
    f"a hybrid query waits up to {QUERY_LOAD_WAIT_S:g} s",
    f"a keyword-only query waits up to {KEYWORD_WAIT_S:g} s",
    f"at most {MAX_TOP_K} passages, {MAX_PASSAGE_CHARS:,} characters each and {MAX_ANSWER_CHARS:,} in all",
    f"at most {MAX_AROUND} passages either\n  side",
    f"a query is cut to {MAX_QUERY_CHARS:,} characters",
    f"at most {MAX_NAMED_FILES} files match it",
    f"the file list gives {DEFAULT_LIST_LIMIT} files (up to {MAX_LIST_LIMIT} when the\n  model asks)",
    f"among the first {NAME_SCAN_FILES} files",
    f"**{L.PARSE_WORKER_MEMORY_MIB >> 10} GiB of address space**",
    f"small files (≤ {workers.QUICK_MAX_BYTES // MIB} MiB) when both are busy, {workers.QUICK_CAP_S:g} s at a time",
    f"idle for {workers.IDLE_STOP_S / 60:g} minutes",
    f"{L.MAX_DOCUMENT_CHARS / 10**6:g} million characters (about a 10 MB plain-text file)",
    f"| {L.MAX_CHUNKS_PER_FILE:,}, each one text",
    f"{L.MAX_DOCUMENT_CHARS * L.TEXT_MARKUP_ALLOWANCE / 10**6:g} million characters as written",
    f"{L.MAX_DOCUMENT_CHARS * L.TEXT_MARKUP_ALLOWANCE * L.TEXT_MAX_BYTES_PER_CHAR / 10**6:g} MB |",
    f"{L.MAX_HTML_TAGS:,} per page",
    f"{L.ZIP_MAX_MEMBERS} files; {L.ZIP_MAX_UNPACKED_BYTES // MIB} MB unpacked; {L.ZIP_MAX_RATIO} × the archive's size "
    f"({L.ZIP_RATIO_FLOOR_BYTES // MIB} MB always allowed)",
    f"{L.ZIP_MAX_MEMBER_BYTES // 10**6} MB per file inside",
    f"{L.ZIP_MAX_UNPACKED_BYTES // MIB} MB unpacked and {L.ZIP_MAX_RATIO} × the file's size",
    f"{L.OFFICE_MAX_XML_BYTES // MIB} MB and {L.OFFICE_MAX_XML_ELEMENTS / 10**6:g} million elements",
    f"{L.MAX_SHEET_CELLS / 10**6:g} million cells",
    f"| PDF pages (`MAX_PDF_PAGES`) | {L.MAX_PDF_PAGES:,} |",
    f"{L.PDF_MAX_CONTENT_RATIO} × the file's size ({L.PDF_CONTENT_FLOOR_BYTES // MIB} MB always allowed), "
    f"at most {L.PDF_MAX_CONTENT_BYTES // MIB} MB",
    f"{L.MAX_IMAGE_PIXELS / 10**6:g} megapixels each, {L.MAX_IMAGE_PIXELS / 2 / 10**6:g} megapixels with transparency",
    f"{L.MAX_OCR_PAGES} pages read by OCR per file",
    f"At most {L.MAX_PICTURES_PER_FILE} pictures inside one document",
    f"larger than {L.MAX_IMAGE_PIXELS / 10**6:g} MP inside a document",
    f"at most {L.OCR_MAX_SIDE:,} pixels on their longer side",
    f"rendered at\n  {L.OCR_DPI} dpi",
    f"Lines longer than {L.LONG_LINE_FACTOR} × chunk size",
    f"tables of up to {L.PAD_COLUMNS} columns",
    f"Headings are clipped to {L.MAX_HEADING_CHARS} characters",
    f"their last {L.MAX_JSON_PATH_CHARS} characters",
    f"more than {L.MAX_HTML_DEPTH} levels deep",
]
STATED_IN_SETTINGS = [
    f"at most {L.MAX_VISION_PICTURES} per file, {L.VISION_CALL_S:g} s per call, {L.VISION_FILE_S:g} s per file",
    f"at most {L.VISION_MAX_SIDE:,} pixels on its longer side; pictures under {L.VISION_MIN_SIDE} pixels on a side",
]


STATED_IN_QUESTIONS = [
    f"at most every {LOG_EVERY_S / 60:g}\nminutes",
    f"its text (up to {querylog.QUESTION_CHARS} characters)",
    f"a {len(querylog.question_digest('kb', 'q'))}-character hash",
    f"up to {querylog.TOP_FILES} returned files",
    f"values of ≤ {PART_SIZE >> 10} KiB",
    f"the questions of the last ~{querylog.FLUSH_EVERY_S:g} s",
]


def test_the_readme_says_how_many_files_the_console_lists():
    assert f"the first {MAX_LISTED_FILES} files of a knowledge base" in CONSOLE


@pytest.mark.parametrize("stated", STATED_IN_QUESTIONS)
def test_the_readme_says_what_the_question_log_keeps_as_the_code_does(stated):
    assert stated in QUESTIONS


@pytest.mark.parametrize("stated", STATED_IN_LIMITS)
def test_the_readme_limits_state_the_codes_numbers(stated):
    assert stated in LIMITS


@pytest.mark.parametrize("stated", STATED_IN_SETTINGS)
def test_the_readme_settings_state_the_vision_models_limits(stated):
    assert stated in SETTINGS
