"""The edges of chunking that an operator sees in the chunks: wide
tables cut into column groups that keep every value under its own column and row, table pieces
that repeat their header, title lines, small JSON files kept whole, the sizes and overlaps of
pieces, parent passages and their children, and the guard that cuts very long lines. Real
parsers on generated files where the input is a file."""

from __future__ import annotations

import functools
import random
import re

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from lucidrag.base.settings import parse_creation_settings
from lucidrag.ingestion import chunking
from lucidrag.ingestion.chunking import chunk_document, split_table, split_text, with_title_line
from lucidrag.ingestion.document import Document, Section
from lucidrag.ingestion.parsing import parse_file

_BORDER = re.compile(r"(?<!\\)\|")


def settings(**kwargs):
    return parse_creation_settings({"embedding_model_uuid": "m", **kwargs})


def row_cells(line: str) -> list[str]:
    line = line.strip()
    line = line[1:] if line.startswith("|") else line
    line = line[:-1] if line.endswith("|") and not line.endswith("\\|") else line
    return [cell.strip() for cell in _BORDER.split(line)]


def values_by_row_and_column(pieces: list[str]) -> dict[tuple[str, str], str]:
    """{(row key, column name): value} of every non-empty value in table pieces (header, separator,
    rows each), failing on a value found twice or a row wider than its header."""
    found: dict[tuple[str, str], str] = {}
    for piece in pieces:
        header, separator, *rows = piece.split("\n")
        names = row_cells(header)
        assert chunking._is_separator_row(separator) and len(row_cells(separator)) == len(names), piece
        for row in rows:
            cells = row_cells(row)
            assert len(cells) <= len(names), piece  # a ragged row may end early
            for name, value in zip(names[1:], cells[1:]):
                if value:
                    assert (cells[0], name) not in found, (cells[0], name)
                    found[(cells[0], name)] = value
    return found


# ---------------------------------------------------------------------------------------------
# Wide tables: column groups


def _wide_csv(columns: int, keys: list[str], blank=lambda r, c: (r + c) % 5 == 0) -> tuple[bytes, dict]:
    names = [f"reading_{c:02d}" for c in range(columns)]
    lines = ["station," + ",".join(names)]
    expected = {}
    for r, key in enumerate(keys):
        values = ["" if blank(r, c) else str(100 * r + c) for c in range(columns)]
        lines.append(key + "," + ",".join(values))
        expected.update({(key, n): v for n, v in zip(names, values) if v})
    return "\n".join(lines).encode(), expected


def test_a_wide_table_keeps_every_value_under_its_own_column_and_row_key():
    data, expected = _wide_csv(12, [f"pump-{r}" for r in range(5)])
    chunks = chunk_document(parse_file(data, "readings.csv"), settings(chunk_size=128)).chunks
    assert len(chunks) > 6
    assert values_by_row_and_column([c.text for c in chunks]) == expected
    # each piece is a narrower table: the key column, then consecutive columns, all of them once
    groups = []
    for chunk in chunks:
        names = row_cells(chunk.text.split("\n")[0])
        assert names[0] == "station"
        if not groups or groups[-1] != names[1:]:
            groups.append(names[1:])
    assert [n for group in groups for n in group] == [f"reading_{c:02d}" for c in range(12)]


async def test_a_wide_spreadsheet_ingests_at_a_small_chunk_size(harness):
    # Column groups whose two header lines still exceeded half a chunk were grouped again,
    # forever: the file failed with "Unexpected error ... RecursionError".
    names = [f"r{c:02d}" for c in range(30)]
    data = ("station," + ",".join(names) + "\npump-1," + ",".join(str(c) for c in range(30))).encode()
    result = await harness.ingest("kb-wide", "wide.csv", data, settings={"chunk_size": 128, "chunk_overlap": 16})
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    response = await harness.retrieve("kb-wide", "r17", settings={"search_mode": "keyword", "source_line": False},
                                      creation={"chunk_size": 128, "chunk_overlap": 16})
    assert "| r17 |" in response.results[0].content[0].text.split("\n")[0]


@pytest.mark.parametrize("size", [64, 100, 128, 260])
def test_a_table_of_one_letter_columns_is_cut_into_groups_that_hold_every_value(size: int):
    names = [chr(ord("a") + c % 26) + str(c // 26 or "") for c in range(60)]
    lines = ["| k | " + " | ".join(names) + " |", "|---" * 61 + "|",
             "| row1 | " + " | ".join(str(c) for c in range(60)) + " |"]
    found = values_by_row_and_column(split_table("\n".join(lines), size))
    assert found == {("row1", name): str(c) for c, name in enumerate(names)}


@pytest.mark.parametrize("size", [128, 512])
def test_column_groups_are_as_wide_as_fit_in_a_quarter_chunk(size: int):
    data, _ = _wide_csv(40, ["p"])
    groups = chunking.column_groups(parse_file(data, "r.csv").sections[0].text.split("\n"), 2, size)
    line_room = max(size // 4, 48)  # below 192 characters, three cells of 16
    heads = [group.split("\n")[:2] for group in groups]
    assert len(heads) > 3
    for (head, separator), (following, _) in zip(heads, heads[1:]):
        assert len(head) <= line_room and len(head) + 1 + len(separator) <= size // 2
        wider = len(head) + len(" | " + row_cells(following)[1])
        assert wider > line_room or wider + 1 + len(separator) + 4 > size // 2  # the next column did not fit


def test_both_header_lines_of_a_column_group_fit_in_half_a_chunk():
    # key "k"; a group of n columns whose names have s characters takes 11 + s + 7n characters
    # in its two header lines: 3 columns of 32 take exactly 64 (half of 128), and after two of 30
    # (55) a name of 3 would take 65
    names = ["a" * 10, "b" * 11, "c" * 11, "d" * 15, "e" * 15, "fff", "g" * 15, "h" * 15]
    lines = ["| k | " + " | ".join(names) + " |", "|---" * 9 + "|", "| 1 | " + " | ".join(["v"] * 8) + " |"]
    groups = chunking.column_groups(lines, 2, 128)
    assert [row_cells(group.split("\n")[0])[1:] for group in groups] == [names[:3], names[3:5], names[5:7], names[7:]]
    assert len("\n".join(groups[0].split("\n")[:2])) == 64


def test_a_table_of_two_long_column_names_keeps_two_columns_in_every_piece():
    header = "| Identifier of the measuring station | Description of the reading taken there |"
    rows = [f"| station-{i} | reading {i} was normal |" for i in range(12)]
    pieces = split_table("\n".join([header, "| --- | --- |", *rows]), 128)
    assert len(pieces) > 3 and pieces[0].startswith("| Identifier of t… | Description of … |\n")
    for piece in pieces:
        assert all(len(row_cells(line)) == 2 for line in piece.split("\n"))
    assert sorted(values_by_row_and_column(pieces).values()) == sorted(f"reading {i} was normal" for i in range(12))


def test_values_in_cells_past_the_header_are_kept_under_an_unnamed_column():
    data, expected = _wide_csv(12, ["pump-0", "pump-1"], blank=lambda r, c: False)
    data += b"\npump-2," + ",".join(str(c) for c in range(13)).encode()  # a cell more than the header
    chunks = chunk_document(parse_file(data, "r.csv"), settings(chunk_size=128)).chunks
    found = values_by_row_and_column([c.text for c in chunks])
    assert found[("pump-2", "reading_11")] == "11" and found[("pump-2", "")] == "12"
    assert ("pump-1", "") not in found


@pytest.mark.parametrize("size, cell", [(128, 16), (300, 18)])  # max(16, size // 16)
def test_long_keys_and_column_names_are_clipped_in_the_headers_but_the_key_is_whole_once(size: int, cell: int):
    key = "pump-station-north-west-0001-b"  # longer than a cell
    exact, longer = "e" * (cell - 2) + "_x", "l" * cell + "_x"
    names = [exact, longer, *(f"r{c:02d}" for c in range(40))]
    data = ("station," + ",".join(names) + "\n" + key + "," + ",".join(str(c) for c in range(42))).encode()
    chunks = chunk_document(parse_file(data, "r.csv"), settings(chunk_size=size)).chunks
    heads = [row_cells(c.text.split("\n")[0]) for c in chunks]
    rows = [row_cells(c.text.split("\n")[2]) for c in chunks]
    assert heads[0][1] == exact  # a name of exactly a cell stays whole; a longer one is clipped to a cell
    if size == 128:  # two names of 16 would make the header line 49 characters, over max(128 // 4, 3 × 16)
        assert heads[0][1:] == [exact]
    assert [name for head in heads for name in head[1:] if name.startswith("l")] == ["l" * (cell - 1) + "…"]
    assert rows[0][0] == key  # the first group names the row in full ...
    assert all(row[0] == key[:cell - 1] + "…" for row in rows[1:])  # ... the others by a clip
    assert len(chunks) > 2 and all(len(c.text) <= size for c in chunks)


def test_rows_with_only_a_key_stay_in_the_first_group_and_empty_rows_are_dropped():
    lines = ["| station | " + " | ".join(f"reading_{c:02d}" for c in range(12)) + " |",
             "|---" * 13 + "|",
             "| pump-0 | " + " | ".join(str(c) for c in range(12)) + " |",
             "| spare-pump | " + " | " * 11 + " |",
             "| " + " | " * 12 + " |",
             "| pump-1 | " + " | " * 11 + " 11 |"]
    groups = chunking.column_groups(lines, 2, 128)
    keys = [[row_cells(row)[0] for row in group.split("\n")[2:]] for group in groups]
    assert keys[0] == ["pump-0", "spare-pump", "pump-1"]
    assert keys[1:-1] == [["pump-0"]] * (len(groups) - 2)
    assert keys[-1] == ["pump-0", "pump-1"]
    assert values_by_row_and_column(groups)[("pump-1", "reading_11")] == "11"


def test_a_markdown_table_without_outer_pipes_keeps_its_values_and_escaped_pipes():
    names = [f"reading_{c:02d}" for c in range(12)]
    table = "\n".join(["station | " + " | ".join(names), " | ".join(["---"] * 13),
                       "pump-0 | a \\| b | " + " | ".join(str(c) for c in range(1, 12)),
                       "pump-1 | " + " | ".join(str(100 + c) for c in range(12))])
    document = parse_file(("# Readings\n\n" + table + "\n").encode(), "readings.md")
    chunks = chunk_document(document, settings(chunk_size=128)).chunks
    found = values_by_row_and_column([c.text for c in chunks])
    assert found[("pump-0", "reading_00")] == "a \\| b"
    assert found[("pump-1", "reading_11")] == "111" and found[("pump-0", "reading_11")] == "11"
    assert len(found) == 24
    assert all(c.headings == ("Readings",) for c in chunks)


def test_the_cells_of_a_row_whose_last_cell_ends_in_an_escaped_pipe():
    assert chunking._cells("| a | b \\|") == ["a", "b \\|"]
    assert chunking._cells("  a | b |  ") == ["a", "b"]
    assert chunking._cells("|| b |") == ["", "b"]
    assert chunking._cells("|a|b|") == ["a", "b"]


# ---------------------------------------------------------------------------------------------
# Tables split by rows


def test_table_pieces_fill_their_budget_and_each_repeats_the_header():
    header = "| SKU | Name | Price |\n| --- | --- | --- |"
    rows = [f"| SKU-{i:04d} | Widget {i} | {i * 3} |" for i in range(40)]
    size = 200
    pieces = split_table(header + "\n" + "\n".join(rows), size)
    for piece in pieces:
        assert piece.startswith(header + "\n") and len(piece) <= size
    bodies = [piece[len(header) + 1:].split("\n") for piece in pieces]
    assert [row for body in bodies for row in body] == rows
    for body, following in zip(bodies, bodies[1:]):  # a piece ends only when the next row does not fit
        assert len(header) + 1 + len("\n".join(body)) + 1 + len(following[0]) > size


def test_table_rows_fill_their_budget_exactly_and_a_row_of_the_whole_budget_stands_alone():
    header = "| k | v |\n|---|---|"
    size = 100
    budget = size - len(header) - 1
    whole = "| a | " + "x" * (budget - 8) + " |"
    huge = "| h | " + "word " * 30 + "|"
    # two rows that fill a piece as far as it goes: 19 + newline + 59 characters
    pair = ["| b | " + "y" * 11 + " |", "| c | " + "z" * (budget - 29) + " |"]
    assert len(whole) == budget and len("\n".join(pair)) == budget - 1
    pieces = split_table("\n".join([header, whole, *pair, huge, *pair]), size)
    assert pieces[0] == f"{header}\n{whole}"
    assert pieces[1] == "\n".join([header, *pair]) == pieces[-1]
    assert all(p.startswith(header + "\n") and len(p) <= size for p in pieces)
    assert " ".join(p[len(header) + 1:] for p in pieces[2:-1]).split() == huge.split()
    assert split_table("\n".join([header, *pair, whole]), size) == ["\n".join([header, *pair]), f"{header}\n{whole}"]


def test_a_table_row_holding_a_long_unbroken_value_is_cut_into_consecutive_parts():
    header = "| id | blob |\n| --- | --- |"
    blob = "".join(random.Random(1).choices("abcdef0123456789", k=1500))
    pieces = split_table(f"{header}\n| 1 | {blob} |", 200)
    assert all(p.startswith(header + "\n") and len(p) <= 200 for p in pieces)
    assert "".join(p[len(header) + 1:] for p in pieces) == f"| 1 | {blob} |"


def test_a_column_group_of_a_small_chunk_keeps_a_short_row_whole():
    # at chunk_size 64 a group's header (clipped names: 49 characters) leaves a quarter of the
    # chunk for rows; a 19-character row is still one piece
    lines = ["| Identifier of the station | Reading of the sensor | Second reading |", "| --- | --- | --- |",
             "| pump-1 | 123456 | 7 |"]
    pieces = split_table("\n".join(lines), 64)
    assert [p.split("\n")[2] for p in pieces] == ["| pump-1 | 123456 |", "| pump-1 | 7 |"]


def test_a_table_row_longer_than_a_piece_is_split_under_the_repeated_header():
    header = "| Clause | Text |\n| --- | --- |"
    long_row = "| 7.2 | " + " ".join(f"The supplier shall replace part {i} within ten days." for i in range(12)) + " |"
    pieces = split_table("\n".join([header, "| 7.1 | Short clause. |", long_row, "| 7.3 | Another. |"]), 200)
    assert pieces[0] == header + "\n| 7.1 | Short clause. |"
    assert pieces[-1] == header + "\n| 7.3 | Another. |"
    middle = pieces[1:-1]
    assert len(middle) > 2 and all(p.startswith(header + "\n") and len(p) <= 200 for p in middle)
    assert " ".join(p[len(header) + 1:] for p in middle).split() == long_row.split()


def test_a_table_without_a_separator_row_repeats_its_first_row():
    rows = [f"| {i} | item {i} |" for i in range(30)]
    pieces = split_table("| id | item |\n" + "\n".join(rows), 120)
    assert len(pieces) > 2 and all(p.split("\n")[0] == "| id | item |" for p in pieces)
    assert [line for p in pieces for line in p.split("\n")[1:]] == rows


def test_a_header_only_table_is_one_piece_and_a_blank_one_none():
    assert split_table("| a | b |\n|---|---|\n\n", 100) == ["| a | b |\n|---|---|"]
    assert split_table("| a | b |", 100) == ["| a | b |"]
    assert split_table(" \n \n", 100) == []


def test_a_wide_header_without_rows_is_split_as_text():
    names = [f"Measurement column number {c}" for c in range(12)]
    header = "| " + " | ".join(names) + " |\n|" + "---|" * 12
    pieces = split_table(header, 128)
    assert len(pieces) > 2 and all(len(p) <= 128 for p in pieces)
    assert "".join(pieces).replace(" ", "") == header.replace(" ", "").replace("\n", "")


def test_a_one_column_table_with_a_long_header_repeats_it_whole():
    header = "| Steps to restart the boiler after a pressure drop in the main circuit |\n| --- |"
    rows = [f"| Step {i}: open valve {i} and wait |" for i in range(10)]
    pieces = split_table("\n".join([header, *rows]), 128)
    assert len(pieces) > 2 and all(p.startswith(header + "\n") for p in pieces)
    assert [line for p in pieces for line in p.split("\n")[2:]] == rows


def test_a_table_whose_header_takes_exactly_half_a_chunk_repeats_it_whole():
    header = "| SKU code | Name of the product item sold today |\n| --- | --- |"
    assert len(header) == 64
    rows = [f"| S{i} | Widget {i} |" for i in range(8)]
    pieces = split_table("\n".join([header, *rows]), 128)
    assert len(pieces) > 1 and all(p.startswith(header + "\n") for p in pieces)


def test_a_markdown_table_with_one_hyphen_delimiters_repeats_them_in_every_piece():
    rows = "\n".join(f"|{i}|item {i}|" for i in range(30))
    document = parse_file(f"# Items\n\n|id|item|\n|-|-|\n{rows}\n".encode(), "items.md")
    chunks = chunk_document(document, settings(chunk_size=100, chunk_overlap=0)).chunks
    assert len(chunks) > 2 and all(c.text.startswith("|id|item|\n|-|-|\n") for c in chunks)


def test_a_table_in_parent_child_mode_repeats_its_header_in_every_child():
    rows = "\n".join(f"| SKU-{i:04d} | Widget number {i} | {i * 3} |" for i in range(60))
    header = "| SKU | Name | Price |\n| --- | --- | --- |"
    document = Document((Section(header + "\n" + rows, ("Price list",), page=2, is_table=True),), "xlsx")
    result = chunk_document(document, settings(chunking="parent_child", chunk_size=256))
    assert len(result.chunks) > len(result.parents) > 1
    for chunk in result.chunks:
        assert chunk.text.startswith(header + "\n") and len(chunk.text) <= 128
        assert chunk.headings == ("Price list",) and chunk.page == 2
        assert chunk.text[len(header):] in result.parents[chunk.parent]
    assert [c.index for c in result.chunks] == list(range(len(result.chunks)))


# ---------------------------------------------------------------------------------------------
# Title lines


def _titled(title: str, body: str = "The pump is serviced every spring by the caretaker.", page=None):
    return Document((Section(f"{title}\n\n{body}", page=page),), "text")


@pytest.mark.parametrize("size, limit", [(512, 150), (200, 100)])
def test_a_title_line_may_be_as_long_as_150_characters_or_half_a_chunk(size: int, limit: int):
    longest, too_long = "T" * (limit - 6) + " notes", "T" * (limit - 5) + " notes"
    (chunk,) = chunk_document(_titled(longest), settings(chunk_size=size)).chunks
    assert chunk.headings == (longest,)
    chunks = chunk_document(_titled(too_long), settings(chunk_size=size)).chunks
    assert not chunks[0].headings and chunks[0].text.startswith(too_long)


def test_a_title_keeps_its_page_and_the_sections_after_it():
    document = Document((Section("Pump maintenance\n\nThe pump is serviced every spring.", page=3),
                         Section("Oil the bearings.", ("Bearings",), page=4),
                         Section("Check the seals.", ("Seals",), page=5)), "pdf")
    chunks = chunk_document(document, settings()).chunks
    assert [(c.headings, c.page, c.text) for c in chunks] == [
        (("Pump maintenance",), 3, "The pump is serviced every spring."),
        (("Bearings",), 4, "Oil the bearings."),
        (("Seals",), 5, "Check the seals.")]
    named = with_title_line(document, 512)
    assert named.sections[0].headings == ("Pump maintenance",) and len(named.sections) == 3
    assert named.format == "pdf"


def test_a_section_that_has_a_heading_keeps_its_first_line():
    document = Document((Section("Short line\n\nThe rest of the section.", ("Guide",)),), "markdown")
    (chunk,) = chunk_document(document, settings()).chunks
    assert chunk.headings == ("Guide",) and chunk.text.startswith("Short line\n\n")
    assert with_title_line(document, 512) == document


@pytest.mark.parametrize("title", ["Note:", "注意：", "First,"])
def test_a_first_line_ending_in_a_clause_mark_is_text(title: str):
    chunks = chunk_document(_titled(title), settings()).chunks
    assert not chunks[0].headings and chunks[0].text.startswith(title)


# ---------------------------------------------------------------------------------------------
# Small JSON files


def test_a_json_file_that_exactly_fits_a_chunk_is_one_headless_chunk():
    # its first "key: value" line followed by a blank line was taken for a title (the heading)
    lines = ("backup.schedule: nightly", "backup.retention_days: 14", "target: s3://vault")
    text = "\n\n".join(lines)
    document = Document(tuple(Section(line, (line.split(".")[0].split(":")[0],)) for line in lines), "json")
    (chunk,) = chunk_document(document, settings(chunk_size=len(text), chunk_overlap=0)).chunks
    assert (chunk.text, chunk.headings, chunk.heading, chunk.embed_text) == (text, (), "", text)
    split = chunk_document(document, settings(chunk_size=len(text) - 1, chunk_overlap=0)).chunks
    assert [c.headings for c in split] == [("backup",), ("backup",), ("target",)]


def test_a_jsonl_file_of_two_records_is_one_chunk_and_a_markdown_file_is_not_merged():
    (chunk,) = chunk_document(parse_file(b'{"a": 1}\n{"b": 2}\n', "e.jsonl"), settings()).chunks
    assert chunk.text == "a: 1\n\nb: 2"
    sections = (Section("Oil the bearings.", ("Bearings",)), Section("Check the seals.", ("Seals",)))
    chunks = chunk_document(Document(sections, "markdown"), settings()).chunks
    assert [c.heading for c in chunks] == ["Bearings", "Seals"]


# ---------------------------------------------------------------------------------------------
# Sizes, overlaps and boundaries of text pieces


_SENTENCES = [f"Valve {i} needs a new seal ring." for i in range(200)]


def _long(i: int, length: int) -> str:
    """A sentence of `length` characters."""
    return (f"Valve {i:02d} is checked by the caretaker every spring before the season " + "x" * length)[
        :length - 1].rstrip() + "."


def _short(i: int, length: int) -> str:
    return (f"Seal {i:02d} is new" + " ok" * length)[:length - 1] + "."


def test_a_text_of_exactly_one_and_a_quarter_chunks_stays_whole():
    text = " ".join(_SENTENCES)[:640]
    assert split_text(text, 512, 64) == [text.strip()]
    assert len(split_text(text + " more", 512, 64)) == 2


@pytest.mark.parametrize("short", [20, 40])  # one unit of the packer (at most 25 characters) or two
def test_each_piece_starts_with_the_last_sentence_of_the_one_before_when_it_fits_the_overlap(short: int):
    # pieces of a long and a short sentence (121 or 141 characters) leave room for the short one
    # of the piece before within the overlap, not for the long one (100)
    text = " ".join(f"{_long(i, 100)} {_short(i, short)}" for i in range(5))
    pairs = [f"{_long(i, 100)} {_short(i, short)}" for i in range(5)]
    overlapping = [pairs[0]] + [f"{_short(i - 1, short)} {pairs[i]}" for i in range(1, 5)]
    assert split_text(text, 200, 64) == overlapping
    assert split_text(text, 200, short + 1) == overlapping  # the sentence and the space after it
    assert split_text(text, 200, short) == pairs


def test_a_piece_starts_at_its_first_sentence_when_the_last_one_before_is_too_long_to_repeat():
    text = " ".join(f"{_short(i, 20)} {_long(i, 150)}" for i in range(4))
    assert split_text(text, 200, 32) == [f"{_short(i, 20)} {_long(i, 150)}" for i in range(4)]


def test_the_overlap_may_start_after_a_clause_mark():
    # "...; Seal 0n is new." ends each piece: its last clause (15 characters) fits the overlap,
    # the whole sentence (41) does not
    sentences = [f"Valve {i:02d} was opened once; Seal {i:02d} is new." for i in range(12)]
    assert all(len(s.split("; ")[0]) + 1 == 25 for s in sentences)  # a packing unit ends at the ";"
    pieces = split_text(" ".join(sentences), 200, 24)
    assert len(pieces) > 2
    for before, after in zip(pieces, pieces[1:]):
        assert after.startswith(before.rsplit("; ", 1)[1] + " "), (before, after)


def test_pieces_of_an_even_text_are_about_equally_full():
    text = " ".join(_SENTENCES[:40])  # 1,269 characters of 31- and 32-character sentences
    pieces = split_text(text, 512, 0)
    assert len(pieces) == 3
    assert min(len(p) for p in pieces) >= 0.85 * len(text) / 3


def test_a_short_paragraph_beside_an_unbroken_run_stands_alone_rather_than_cutting_the_run_once_more():
    # three full pieces of a 384-letter run cost two cuts inside it; putting "Key:" in the first
    # piece would cost a third
    run = "".join(random.Random(2).choices("abcdefghijklmnopqrstuvwxyz", k=384))
    assert split_text("Key:\n\n" + run, 128, 0) == ["Key:", run[:128], run[128:256], run[256:]]
    assert split_text(run + "\n\nEnd.", 128, 16) == [run[:128], run[128:256], run[256:], "End."]


def test_without_overlap_the_pieces_are_the_text_cut_at_sentence_ends():
    text = " ".join(_SENTENCES[:40])
    pieces = split_text(text, 200, 0)
    assert " ".join(pieces) == text
    assert all(p.endswith(".") and 50 <= len(p) <= 200 for p in pieces)


def test_a_paragraph_break_is_preferred_to_a_better_balanced_line_break():
    line = "x" * 49
    first, second = "\n".join([line] * 3), "\n".join([line] * 5)  # 149 and 249 characters
    # a line break after 199 of 399 characters would balance the pieces better
    assert split_text(first + "\n\n" + second, 256, 0) == [first, second]


def test_a_sentence_longer_than_a_chunk_is_cut_between_words_before_inside_a_long_word():
    # the even cut would fall inside the 48-letter word; a cut at the space before it is cheaper
    words = ["pump"] * 14 + ["x" * 48] + ["seal"] * 20
    text = " ".join(words)
    pieces = split_text(text, 128, 0)
    assert " ".join(pieces) == text, pieces


def test_paragraphs_without_final_punctuation_are_cut_between_paragraphs():
    items = [f"Step {i}. Open valve {i} and wait for the pressure to drop below two bar" for i in range(12)]
    text = "\n\n".join(items)  # each paragraph has a sentence end inside, none at its end
    pieces = split_text(text, 300, 0)
    assert len(pieces) > 2
    assert all(piece in [  # every piece is a run of whole paragraphs
        "\n\n".join(items[i:j]) for i in range(len(items)) for j in range(i + 1, len(items) + 1)] for piece in pieces)


def _piece_cost(atoms, first: int, last: int, size: int) -> float:
    """What chunking.py's docstring charges a piece of atoms[first..last]: PIECE_COST, the cut
    after it (unless it ends the text), SHORT_COST under a quarter of the size, and BALANCE_COST
    × (unused share)²."""
    length = atoms[last].end - atoms[first].start
    cost = chunking.PIECE_COST + chunking.BALANCE_COST * (1 - length / size) ** 2
    cost += chunking.SHORT_COST if length < size / 4 else 0.0
    return cost + (chunking._CUT_COST[atoms[last].cut] if last < len(atoms) - 1 else 0.0)


def _cheapest_cost(atoms, size: int) -> float:
    @functools.lru_cache(maxsize=None)
    def rest(first: int) -> float:  # the cheapest packing of atoms[first:]
        if first == len(atoms):
            return 0.0
        return min(_piece_cost(atoms, first, last, size) + rest(last + 1) for last in range(first, len(atoms))
                   if atoms[last].end - atoms[first].start <= size)
    return rest(0)


def test_pieces_are_the_cheapest_packing_of_the_text_under_the_documented_costs():
    rng = random.Random(21)
    words = "valve seal pump gasket water steam filter ring boiler tank".split()
    for _ in range(40):
        paragraphs = []
        for _ in range(rng.randint(2, 6)):
            clauses = [" ".join(rng.choices(words, k=rng.randint(2, 10))) for _ in range(rng.randint(1, 6))]
            paragraphs.append("".join(c + rng.choice([", ", ". ", "; "]) for c in clauses[:-1]) + clauses[-1] + ".")
        text = "\n\n".join(paragraphs)
        for size in (128, 256):
            atoms = chunking._atoms(text, size)
            spans = chunking._pack(atoms, size)
            assert [a for first, last in spans for a in range(first, last + 1)] == list(range(len(atoms)))
            assert all(atoms[last].end - atoms[first].start <= size for first, last in spans)
            cost = sum(_piece_cost(atoms, first, last, size) for first, last in spans)
            assert cost == pytest.approx(_cheapest_cost(atoms, size), abs=1e-9)


# Texts on which packings of nearly equal cost compete (a cube instead of a square for the
# balance term, a piece of exactly a quarter counted as short, or a balance term that grows with
# the fill pick another one), found by generating texts like the test above.
_CLOSE_CALLS = [
    "valve steam gasket ring pum. gasket valve gask; water water seal filter pump filter valve seal pump valv. "
    "steam pump water seal pump water filter gasket seal.\n\nseal valve ring water steam pump steam; water seal "
    "filter ring valve water water rin, gasket water seal seal rin, pump seal steam water pum; pump water pump "
    "valve valve steam water ring water seal wa, water filter ring st.\n\nwater water valve steam steam filter "
    "steam ri; valve pump pump steam seal valve gasket gasket val. valve water valve; pump seal gasket.\n\nvalve "
    "pump ring seal fi; pump seal filter pump ring ring valve filter filter steam. water pump valve filt. pump "
    "pump valve. steam valve water steam valve filter filter ring r.",
    "filter pump ring water water gasket water seal seal; gasket steam pump seal r, pump water ring filter ring "
    "gasket water va. ring filter seal water steam gasket filter valve valv; valve seal seal ring ste.\n\nseal "
    "ring g, filter water pump valve gasket steam steam steam se; gasket gasket water gasket ring valve filter "
    "filter valve fi; seal seal gasket gasket valve pump gasket steam water, seal valve valve ring valve "
    "ste.\n\npump gasket filter ring ring valve water pump ring steam gas. water steam pump valve pump water pump "
    "wate.",
    "steam pump filter seal pump seal, ring gasket steam seal. seal water gasket water gasket ring w. seal valve "
    "valve steam gasket g.\n\npump water ring pump gasket steam valve pump ring ring steam; gasket steam water "
    "pump filter pump gasket seal val.\n\nsteam gasket filter ga; pump water filter gasket filter pump filter, "
    "valve gasket seal pump steam seal fil.\n\nfilter seal gaske, valve filter gasket water valve filter gasket "
    "water seal. steam water gasket water ring sea; seal steam valve water steam rin; steam gasket steam water "
    "pump seal gasket valve pump water, filter water water pump seal seal filte.",
]


@pytest.mark.parametrize("text", _CLOSE_CALLS)
def test_close_calls_are_packed_at_the_cheapest_cost(text: str):
    atoms = chunking._atoms(text, 128)
    spans = chunking._pack(atoms, 128)
    assert sum(_piece_cost(atoms, first, last, 128) for first, last in spans) == pytest.approx(
        _cheapest_cost(atoms, 128), abs=1e-9)


def test_fixed_windows_start_at_the_first_character_and_never_repeat_a_tail():
    text = "".join(chr(ord("a") + i % 26) for i in range(1010))
    chunks = chunk_document(Document((Section(text),), "text"),
                            settings(chunking="fixed", chunk_size=300, chunk_overlap=50)).chunks
    assert [c.text for c in chunks] == [text[0:300], text[250:550], text[500:800], text[750:1010]]


# ---------------------------------------------------------------------------------------------
# Parent passages and their children


def test_parent_child_children_are_half_a_chunk_and_overlap_by_up_to_a_quarter_of_it():
    # chunk_size 256: children of up to 128 characters overlapping by up to 32 (not chunk_overlap's
    # 64); a line of a 69- and a 27-character sentence leaves room for the short one before it
    lines = [f"{_long(i, 69)} {_short(i, 27)}" for i in range(16)]
    document = Document((Section("\n".join(lines), ("Valves",), page=7),), "docx")
    result = chunk_document(document, settings(chunking="parent_child", chunk_size=256, chunk_overlap=64))
    assert result.parents == ("\n".join(lines[:8]), "\n".join(lines[8:]))
    for parent in (0, 1):
        children = [c.text for c in result.chunks if c.parent == parent]
        first = 8 * parent
        assert children == [lines[first]] + [f"{_short(i - 1, 27)}\n{lines[i]}" for i in range(first + 1, first + 8)]
    assert all(c.headings == ("Valves",) and c.page == 7 for c in result.chunks)
    assert [c.index for c in result.chunks] == list(range(16))


def test_parent_child_children_of_a_small_chunk_size_are_64_characters():
    text = "".join(random.Random(3).choices("abcdefghijklmnopqrstuvwxyz", k=3000))  # > 4 parents
    result = chunk_document(Document((Section(text),), "text"),
                            settings(chunking="parent_child", chunk_size=100, chunk_overlap=0))
    assert max(len(c.text) for c in result.chunks) == 64
    assert "".join(result.parents) == text  # parent passages do not overlap


def test_parent_child_prose_children_do_not_repeat_the_first_line():
    text = "\n".join(f"Line {i}: check valve {i} for leaks before the season starts." for i in range(40))
    result = chunk_document(Document((Section(text),), "text"), settings(chunking="parent_child", chunk_size=256))
    assert sum(c.text.startswith("Line 0:") for c in result.chunks) == 1


# ---------------------------------------------------------------------------------------------
# The guard for very long lines


def test_the_prose_around_a_very_long_line_is_chunked_as_prose():
    rng = random.Random(9)
    long = "".join(rng.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=5000))
    intro = " ".join(f"Column {i} of the export holds the reading of sensor {i}." for i in range(12))
    outro = "The export ends here. Nothing else follows."
    pieces = split_text(f"{intro}\n{long}\n{outro}", 512, 0)
    assert " ".join(pieces[:2]) == intro  # cut at a sentence end, not as fixed windows
    assert pieces[-1] == outro
    assert "".join(pieces[2:-1]) == long


def test_a_very_long_line_is_cut_into_runs_of_half_to_the_whole_bound():
    sentence = "Der Export enthaelt alle Spalten der Tabelle ohne Zeilenumbruch. "
    line = (sentence * 200).strip()
    size = 256
    limit = 4 * size
    runs = chunking.bounded_runs("Intro line.\n" + line, size, 32)
    assert runs[0] == ("Intro line.\n", True)
    assert "".join(text for text, _ in runs) == "Intro line.\n" + line
    assert all(breakable for _, breakable in runs)
    assert all(limit // 2 <= len(text) <= limit for text, _ in runs[1:-1])


def test_a_long_line_with_few_sentence_ends_is_cut_at_those_in_the_second_half_of_each_window():
    rng = random.Random(8)
    line = "".join("。" if (i + 1) % 600 == 0 else chr(rng.randint(0x4E00, 0x9FA5)) for i in range(5000))
    limit = 4 * 128
    runs = chunking.bounded_runs(line, 128, 0)
    assert "".join(text for text, _ in runs) == line
    for text, breakable in runs[:-1]:
        if breakable:  # cut just after a 。 that lies in the second half of its window
            assert text.endswith("。") and limit // 2 <= len(text) <= limit
        else:
            assert len(text) == limit and "。" not in text[limit // 2:]
    assert [b for _, b in runs].count(True) >= 3


def test_an_unbreakable_line_becomes_the_fixed_windows_of_the_line():
    line = "".join(random.Random(4).choices("abcdefghijklmnopqrstuvwxyz", k=6000))
    size, overlap = 300, 50
    pieces = split_text(line, size, overlap)
    step = size - overlap
    windows = [line[i:i + size] for i in range(0, len(line) - 4 * size, step)]
    assert pieces[:len(windows)] == windows
    assert all(len(p) <= size for p in pieces)


def test_a_line_at_the_bound_is_packed_with_the_text_around_it():
    line = "".join(random.Random(6).choices("abcdefghijklmnopqrstuvwxyz", k=4 * 128))
    text = f"Hi.\n{line}\nBye."
    assert chunking.bounded_runs(text, 128, 0) == [(text, True)]
    pieces = split_text(text, 128, 0)
    assert pieces[0].startswith("Hi.\n") and pieces[-1].endswith("\nBye.")
