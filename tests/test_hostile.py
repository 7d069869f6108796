"""Hostile but legal files: work and memory grow linearly with the file, and a
file past a documented limit FAILS with a message naming the limit. Real generated files, real
parsers; the assertions count characters and chunks, never time."""

from __future__ import annotations

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from lucidrag.base import limits
from lucidrag.base.errors import LimitExceeded, ParseError
from lucidrag.base.settings import parse_creation_settings
from lucidrag.ingestion import chunking
from lucidrag.ingestion.chunking import chunk_document
from lucidrag.ingestion.parsing import jsondoc, markdown_text, parse_file
from tests import hostile_files as h
from tests import samples
from tests.conftest import Harness

KB = "kb-hostile"
SIZE = 512
LINE_BOUND = 4 * SIZE  # lucidrag.base.limits.LONG_LINE_FACTOR × the default chunk_size
BLOCK_BOUND = 16 * SIZE  # lucidrag.base.limits.SPLITTER_BLOCK_FACTOR × the default chunk_size


def settings(**kwargs):
    return parse_creation_settings({"embedding_model_uuid": "m", **kwargs})


@pytest.fixture
def embedded_chars(host) -> list[int]:
    """Characters the fake embedding model received (the host only counts texts)."""
    total = [0]
    embed = host.embed_fn

    def counting(text: str):
        total[0] += len(text)
        return embed(text)

    host.embed_fn = counting
    return total


@pytest.fixture
def splitter_inputs(monkeypatch) -> list[str]:
    """Every text handed to semantic-text-splitter."""
    seen: list[str] = []
    real = chunking._splitter

    class Recording:
        def __init__(self, splitter) -> None:
            self._splitter = splitter

        def chunks(self, text: str):
            seen.append(text)
            return self._splitter.chunks(text)

        def chunk_indices(self, text: str):
            seen.append(text)
            return self._splitter.chunk_indices(text)

    monkeypatch.setattr(chunking, "_splitter", lambda size, overlap: Recording(real(size, overlap)))
    return seen


def _longest_line(texts: list[str]) -> int:
    return max((len(line) for text in texts for line in text.split("\n")), default=0)


# ---------------------------------------------------------------------------------------------
# Lines without whitespace


@pytest.mark.parametrize("data", [h.long_line(300_000), h.long_line(100_000, cjk=True), h.words_line(300_000)],
                         ids=["latin", "cjk", "words-without-sentences"])
def test_a_long_line_reaches_the_splitter_only_in_bounded_runs(data: bytes, splitter_inputs):
    # The splitter's time grows with the square of a stretch without line or sentence breaks.
    text = data.decode()
    document = parse_file(data, "line.txt")
    chunks = chunk_document(document, settings()).chunks

    assert _longest_line(splitter_inputs) <= LINE_BOUND
    assert all(len(c.text) <= SIZE for c in chunks)
    assert len(chunks) <= 1.3 * len(text) / (SIZE - 64) + 2
    covered = "".join(c.text for c in chunks)
    assert len(covered) >= len(text.replace(" ", "")) * 0.99  # nothing dropped


def test_an_unbreakable_run_is_cut_into_overlapping_windows_that_cover_it(splitter_inputs):
    text = h.long_line(50_000).decode()
    pieces = chunking.split_text(text, 300, 50)
    assert _longest_line(splitter_inputs) <= 4 * 300
    assert all(len(p) <= 300 for p in pieces)
    assert pieces[0] == text[:300]
    end = 0  # the pieces cover the text in order, without a gap (overlapping by at most 50)
    for piece in pieces:
        start = text.index(piece, max(0, end - 50))
        assert start <= end
        end = start + len(piece)
    assert end == len(text)


async def test_a_2mb_line_without_whitespace_ingests_with_linear_chunks(harness: Harness, host, embedded_chars):
    # (chunked in a parse worker: what its splitter is handed is the test above's)
    data = h.long_line(2_000_000)
    result = await harness.ingest(KB, "line.txt", data)
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    assert host.vector_count(KB) <= 1.2 * len(data) / (SIZE - 64)
    assert embedded_chars[0] <= 1.2 * len(data)


def test_normal_prose_is_chunked_exactly_as_without_the_guards(splitter_inputs):
    # The line guard only touches lines longer than LONG_LINE_FACTOR × chunk_size; the splitter,
    # handed the text in blocks, cuts the units it cuts from the whole text.
    text = "\n\n".join(f"Paragraph {i}. " + "Words of a normal sentence here. " * 10 for i in range(300))
    assert chunking.bounded_runs(text.strip(), SIZE, 64) == [(text.strip(), True)]
    assert chunking.split_text(text, SIZE, 64) == chunking._pack_text(text.strip(), SIZE, 64)
    assert max(map(len, splitter_inputs)) <= BLOCK_BOUND < len(text)
    whole = chunking.TextSplitter(SIZE // 8, overlap=0, trim=True).chunk_indices(text)
    assert chunking._splitter_spans(text, SIZE // 8, SIZE) == [(o, o + len(c)) for o, c in whole]


def test_a_text_of_many_short_lines_reaches_the_splitter_only_in_bounded_blocks(splitter_inputs):
    # The splitter rescans the rest of its input for every unit it cuts: 9.5 MB of "ab\n" in one
    # call ran for over half an hour (quadratic), in bounded blocks it takes seconds.
    text = "ab\n" * 200_000
    pieces = chunking.split_text(text, SIZE, 64)

    assert max(map(len, splitter_inputs)) <= BLOCK_BOUND
    assert sum(map(len, splitter_inputs)) <= 1.2 * len(text)  # each character handed over about once
    assert all(len(p) <= SIZE for p in pieces)
    assert "".join(p.replace("\n", "") for p in pieces).count("ab") >= 200_000  # nothing dropped
    assert len(pieces) <= 1.3 * len(text) / (SIZE - 64)


# ---------------------------------------------------------------------------------------------
# Wide tables


@pytest.mark.parametrize("name,data", [
    ("wide.csv", h.wide_csv(5000, 7)),
    ("wide.xlsx", h.wide_xlsx(3000, 5)),
    ("wide.html", h.wide_html(600, 3)),
], ids=["csv-5000-columns", "xlsx-3000-columns", "html-600-columns"])
def test_a_wide_table_embeds_a_small_multiple_of_its_text(name: str, data: bytes):
    document = parse_file(data, name)
    chunks = chunk_document(document, settings()).chunks
    embedded = sum(len(c.embed_text) for c in chunks)

    assert embedded <= 2 * len(document.text)  # was 220× for the 5,000-column CSV
    assert len(chunks) <= 3 * len(document.text) / SIZE + 4
    assert all(len(c.text) <= SIZE for c in chunks)
    # Each piece is a table whose header names its columns next to the first (key) column.
    piece = next(c.text for c in chunks if "col_00420 |" in c.text.split("\n", 1)[0])
    assert piece.startswith("| col_00000 | ")
    assert piece.split("\n")[1].startswith("|---|")


async def test_a_5000_column_csv_sends_its_text_not_57_million_characters(
        harness: Harness, embedded_chars):
    data = h.wide_csv(5000, 7)
    result = await harness.ingest(KB, "wide.csv", data)
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    assert embedded_chars[0] <= 3 * len(data)


def test_every_value_of_a_wide_table_is_kept_under_a_short_header():
    data = h.wide_csv(1000, 3)
    chunks = chunk_document(parse_file(data, "wide.csv"), settings()).chunks
    headers = {c.text.split("\n")[0] for c in chunks}
    assert all(len(header) <= SIZE // 4 for header in headers)
    names = [cell.strip() for header in headers for cell in header.strip("|").split("|")]
    assert sorted(set(names)) == [f"col_{n:05d}" for n in range(1000)]
    assert len(names) == 999 + len(headers)  # the key column is repeated in each group
    values = [cell.strip() for c in chunks for line in c.text.split("\n")[2:] for cell in line.strip("|").split("|")]
    assert len(values) == 3 * 999 + 3 * len(headers)  # every value once, plus the row's key per group


def test_one_cell_rows_under_a_very_wide_header_are_not_padded(monkeypatch):
    data = h.ragged_csv(5000, 5000)
    document = parse_file(data, "ragged.csv")
    assert len(document.text) <= 2 * len(data)  # padding made it 5,000 × 5,000 cells
    assert "row 4999" in document.text
    # Column groups visit each row only as far as the row reaches (not rows × groups).
    checks = [0]

    def counting_any(cells):
        checks[0] += 1
        return any(cells)

    monkeypatch.setattr(chunking, "any", counting_any, raising=False)
    chunks = chunk_document(document, settings()).chunks
    assert checks[0] <= 2 * 5000 + 5000
    assert sum(len(c.embed_text) for c in chunks) <= 2 * len(document.text)


# ---------------------------------------------------------------------------------------------
# Archives and the characters limit


async def test_a_zip_that_expands_hundreds_of_times_fails_naming_the_ratio_and_leaves_nothing(
        harness: Harness, host, embedded_chars):
    data = h.text_bomb_zip(members=20, chars_per_member=2_000_000)  # 40 M characters from ~140 KB
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    result = await harness.ingest(KB, "reports.zip", data)
    assert result.status == DocumentStatus.FAILED
    assert "more than 100 times its own size" in result.error_message
    assert "upload them unzipped" in result.error_message
    assert embedded_chars[0] == 0 and host.vector_count(KB) == 0


def test_the_zip_bomb_is_refused_before_its_members_are_unpacked(monkeypatch):
    from lucidrag.ingestion.parsing import archive

    unpacked: list[int] = []
    real_read = archive._read
    monkeypatch.setattr(archive, "_read", lambda *a: unpacked.append(1) or real_read(*a))
    with pytest.raises(ParseError, match="times its own size"):
        parse_file(h.text_bomb_zip(members=20, chars_per_member=2_000_000), "reports.zip")
    assert unpacked == []  # the declared sizes already tell
    # Under ZIP_RATIO_FLOOR_BYTES unpacked the ratio does not apply: 2 MB from a ~3 KB archive.
    document = parse_file(h.text_bomb_zip(members=1, chars_per_member=2_000_000), "one.zip")
    assert len(document.text) == 2_000_000


async def test_an_archive_past_the_characters_limit_fails_and_says_what_to_do(harness: Harness, host,
                                                                             embedded_chars, monkeypatch):
    monkeypatch.setattr(limits, "MAX_DOCUMENT_CHARS", 50_000)
    members = {f"notes_{n}.txt": h.words_line(30_000, seed=n) for n in range(3)}
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    result = await harness.ingest(KB, "notes.zip", samples.zip_bytes(members))
    assert result.status == DocumentStatus.FAILED
    assert result.error_message == (
        "This .zip archive holds more than 50,000 characters of text, the most LucidRAG indexes from "
        "one file. Split it into smaller archives and upload them separately.")
    assert embedded_chars[0] == 0 and host.vector_count(KB) == 0


def test_nested_archives_count_against_the_same_characters_budget(monkeypatch):
    monkeypatch.setattr(limits, "MAX_DOCUMENT_CHARS", 50_000)
    inner = samples.zip_bytes({f"n{n}.txt": h.words_line(20_000, seed=n) for n in range(2)})
    outer = samples.zip_bytes({"a.zip": inner, "b.txt": h.words_line(20_000, seed=9)})
    with pytest.raises(LimitExceeded, match="more than 50,000 characters"):
        parse_file(outer, "outer.zip")
    # within the budget, nothing changes
    document = parse_file(samples.zip_bytes({"a.zip": inner}), "outer.zip")
    assert len(document.text) >= 40_000


async def test_a_plain_file_past_the_characters_limit_fails_with_the_limit_in_the_message(
        harness: Harness, host, monkeypatch):
    monkeypatch.setattr(limits, "MAX_DOCUMENT_CHARS", 50_000)
    result = await harness.ingest(KB, "big.txt", h.words_line(60_000))
    assert result.status == DocumentStatus.FAILED
    assert "more than 50,000 characters of text" in result.error_message
    assert "Split it into smaller files" in result.error_message
    assert host.vector_count(KB) == 0



# ---------------------------------------------------------------------------------------------
# Headings and JSON paths repeated per chunk or per leaf


def test_a_deep_json_array_does_not_repeat_its_path_for_every_value():
    data = h.deep_json(900, leaves=4000)  # 13 KB
    document = parse_file(data, "deep.json")
    assert len(document.text) <= 2 * len(data)  # was 7.2 million characters
    assert all(len(line.split(": ", 1)[0]) <= limits.MAX_JSON_PATH_CHARS for line in document.text.split("\n"))


def test_a_deep_json_of_objects_keeps_each_path_bounded():
    data = ('{"a":' * 900 + "[" + ",".join('{"k":%d}' % n for n in range(2000)) + "]" + "}" * 900).encode()
    document = parse_file(data, "deep.json")
    assert len(document.text) <= 2000 * (limits.MAX_JSON_PATH_CHARS + 10)  # was 2000 × 1,800
    assert document.text.endswith("a[1999].k: 1999")


def test_a_json_list_of_numbers_fails_at_the_characters_limit_while_it_is_flattened(monkeypatch):
    # Counted once every Section existed, 2.4 million numbers (4.8 MB) grew the reader by 770 MiB.
    monkeypatch.setattr(limits, "MAX_DOCUMENT_CHARS", 50_000)
    built = [0]
    section = jsondoc._section

    def counting(*args, **kwargs):
        built[0] += 1
        return section(*args, **kwargs)

    monkeypatch.setattr(jsondoc, "_section", counting)
    with pytest.raises(LimitExceeded, match="more than 50,000 characters of text"):
        parse_file(h.json_flat_numbers(20_000), "numbers.json")  # 40 KB: read, then flattened
    assert built[0] <= 50_000 // len("[0]: 1")  # not one per number


@pytest.fixture
def markdown_inputs(monkeypatch) -> list[str]:
    """Every text handed to markdown-it."""
    seen: list[str] = []
    real = markdown_text._parser

    class Recording:
        def parse(self, text: str):
            seen.append(text)
            return real().parse(text)

    monkeypatch.setattr(markdown_text, "_parser", Recording)
    return seen


def test_a_long_markdown_file_reaches_markdown_it_in_segments_with_the_same_sections(markdown_inputs, monkeypatch):
    # markdown-it holds ~460 bytes per token, 3-4 per line: 300,000 headings (3.6 MB) took 550 MiB.
    data = h.bare_headings_markdown(20_000)
    segmented = parse_file(data, "headings.md")
    assert max(text.count("\n") for text in markdown_inputs) <= 2 * markdown_text.SEGMENT_LINES
    monkeypatch.setattr(markdown_text, "SEGMENT_LINES", 10**9)
    assert parse_file(data, "headings.md") == segmented
    assert segmented.sections[0].text.startswith("h0\nh1\nh2")


@pytest.mark.parametrize("segment_lines", [1, 3])
def test_markdown_cut_into_segments_reads_as_it_does_whole(segment_lines: int, monkeypatch):
    # Cuts fall where a top-level block starts; one inside a fence or an HTML block that blank lines
    # do not end (an unclosed one too) is found and the segment parsed again, longer.
    blocks = ["# Title", "Para line\ncontinued", "```\n# not a heading\n\ncode\n```", "<!--\n\n# hidden\n\n-->",
              "- item\n\n  # in the item\n\n- item", "> quote\n\n# after the quote", "    # indented code",
              "| a | b |\n|---|---|\n| 1 | 2 |", "Setext\n======", "<div>\n# in html\n</div>", "# a\n## b\n### c",
              "- a\n  ```\n  # in an unclosed fence of an item\n\n# top", "  ```\n\n# in an indented fence\n  ```",
              "<pre>\n\n# pre\n\n</pre>", "```\nunclosed\n\n# in it to the end"]
    text = "\n\n".join(blocks[i % len(blocks)] for i in range(3 * len(blocks) - 1))
    whole = markdown_text.markdown_sections(text)
    monkeypatch.setattr(markdown_text, "SEGMENT_LINES", segment_lines)
    assert markdown_text.markdown_sections(text) == whole


def test_a_huge_heading_is_clipped_before_it_is_prefixed_to_every_chunk():
    data = h.long_heading_markdown(40_000, 200_000)
    document = parse_file(data, "notes.md")
    chunks = chunk_document(document, settings()).chunks
    embedded = sum(len(c.embed_text) for c in chunks)
    assert embedded <= 1.5 * len(document.text)  # was 100× (40,000 characters × 493 chunks)
    assert all(len(c.heading) <= limits.MAX_HEADING_CHARS for c in chunks)


async def test_a_parser_plugins_output_past_the_characters_limit_fails_too(harness: Harness, host, monkeypatch):
    from langbot_plugin.api.entities.builtin.rag.models import ParseResult, TextSection

    monkeypatch.setattr(limits, "MAX_DOCUMENT_CHARS", 50_000)
    parsed = ParseResult(text="", sections=[TextSection(content="word " * 12_000, heading="Intro", level=1)])
    result = await harness.ingest(KB, "scan.pdf", b"%PDF-1.4", parsed=parsed)
    assert result.status == DocumentStatus.FAILED
    assert "more than 50,000 characters of text" in result.error_message
    assert host.vector_count(KB) == 0


async def test_an_office_file_whose_xml_unpacks_hundreds_of_times_fails_before_it_is_parsed(
        harness: Harness, host, monkeypatch):
    from lucidrag.ingestion.parsing import word

    parsed: list[int] = []
    real_parse = word.parse_docx
    monkeypatch.setattr(word, "parse_docx", lambda *a: parsed.append(1) or real_parse(*a))
    data = h.docx_xml_bomb(400_000)  # ~80 KB holding 14 MB of XML (1 M paragraphs: 618 MB RSS)
    result = await harness.ingest(KB, "memo.docx", data)
    assert result.status == DocumentStatus.FAILED
    assert "more than 100 times its own size" in result.error_message
    assert "save it again or split it" in result.error_message
    assert parsed == [] and host.vector_count(KB) == 0


# ---------------------------------------------------------------------------------------------
# Passages per file


def tiny_rows_csv(rows: int) -> bytes:
    """A two-column CSV of `rows` short rows (~7 bytes each): at chunk_size 64, ~4 rows a passage."""
    return ("id,v\n" + "".join(f"{n},{n % 7}\n" for n in range(rows))).encode()


async def test_a_file_of_too_many_passages_fails_while_chunked_before_anything_is_embedded(harness: Harness, host):
    # 1.6 MB of tiny rows at the smallest chunk_size: ~55,000 passages, each one embedding and one vector
    settings = {"chunk_size": 64, "chunk_overlap": 0}
    await harness.create(KB, settings)
    result = await harness.ingest(KB, "readings.csv", tiny_rows_csv(220_000), settings)
    assert result.status == DocumentStatus.FAILED
    assert result.error_message == (
        "This file makes more than 50,000 passages at this knowledge base's chunk size of 64 characters "
        "(structure chunking), the most LucidRAG indexes from one file (MAX_CHUNKS_PER_FILE): each passage is "
        "embedded by the embedding model and stored as a vector. Split it into smaller files and upload them "
        "separately (for long text, a knowledge base created with a larger chunk_size makes fewer passages).")
    assert host.embedded_texts == 0 and host.vector_count(KB) == 0


@pytest.mark.parametrize("chunking", ["structure", "fixed", "parent_child"])
async def test_a_file_of_as_many_passages_as_the_limit_completes_and_one_more_fails(
        harness: Harness, host, monkeypatch, chunking: str):
    data = h.many_headings_markdown(150)  # a passage per heading (parent_child: per child passage)
    made = len(chunk_document(parse_file(data, "notes.md"), settings(chunking=chunking)).chunks)
    assert made >= 150
    await harness.create(KB, {"chunking": chunking})
    monkeypatch.setattr(limits, "MAX_CHUNKS_PER_FILE", made)
    result = await harness.ingest(KB, "notes.md", data, {"chunking": chunking})
    assert result.status == DocumentStatus.COMPLETED and result.chunks_created == made
    monkeypatch.setattr(limits, "MAX_CHUNKS_PER_FILE", made - 1)
    embedded = host.embedded_texts
    result = await harness.ingest(KB, "more-notes.md", data, {"chunking": chunking})
    assert result.status == DocumentStatus.FAILED
    assert f"more than {made - 1:,} passages" in result.error_message and f"({chunking} chunking)" in result.error_message
    assert host.embedded_texts == embedded
