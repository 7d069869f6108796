"""Structure-aware splitting of a parsed Document into chunks that stand on their own.

Sections (one heading path each) are never merged, so a chunk never spans two headings. A
section of up to WHOLE_SLACK (1.25) × `chunk_size` characters is one chunk. A longer one is cut
into small units at semantic-text-splitter's boundaries (paragraphs, lines, sentences by the
Unicode rules, which include 。！？, then words and characters) and the units are packed into
pieces of at most `chunk_size` by the cheapest set of cuts (`_pack`): few pieces, cuts at the
strongest boundary available, no piece under a quarter of `chunk_size` unless the section is
that short, pieces about equally full. The overlap is whole sentences (or clauses) of at most
`chunk_overlap` characters from the end of the piece before, never making a piece longer than
`chunk_size`. Tables are split by rows and every piece repeats the header row.

A headless document's first line is taken as its title when it is short, ends without
punctuation and a blank line follows (`_with_title`; not in JSON, whose lines are data): it
becomes the heading of that text.

Three guards keep the work linear on hostile input: lines longer than the splitter can handle
are cut into bounded runs first (bounded_runs), the splitter is handed a long text in bounded
blocks (_splitter_spans), and tables too wide to repeat their header are cut into column groups
(column_groups). The chunks are counted section by section: past limits.MAX_CHUNKS_PER_FILE the
file fails there (`too_many_chunks`), before any chunk is embedded.

Each chunk carries `embed_text`: its heading path ("Guide › Install › Linux") prefixed to its
body, so a chunk stands on its own when embedded and shown to the model; the keyword index scores
the heading as a field of its own (keyword.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

from semantic_text_splitter import TextSplitter

from lucidrag.base import limits
from lucidrag.base.errors import LimitExceeded
from lucidrag.base.limits import (
    LONG_LINE_FACTOR,
    SPLITTER_BLOCK_FACTOR,
    TITLE_MAX_CHARS,
    WIDE_TABLE_HEADER_SHARE,
)
from lucidrag.base.settings import CreationSettings
from lucidrag.ingestion.document import Document, Section

HEADING_SEPARATOR = " › "
_CELL_BORDER = re.compile(r"(?<!\\)\|")
_RUN_BREAKS = (
    re.compile(r"[.!?。！？…]+[\"'”’)）\]]*(?:\s+|(?=[^\x00-\x7f]))"),  # sentence end (Latin needs a space)
    re.compile(r"\s+"),
    re.compile(r"[；;，,、：:]+"),
)
# A section of up to this many times chunk_size stays one chunk: cutting a 600-character
# abstract into 512 + 88 leaves a fragment that answers nothing on its own.
WHOLE_SLACK = 1.25
# Costs of one packing (lower is better): every piece costs PIECE_COST, a cut costs by where it
# falls (_CUT_COST, by boundary strength), a piece under a quarter of chunk_size costs SHORT_COST
# and an unfilled piece BALANCE_COST × (unused share)². Cutting inside a sentence costs more
# than a few extra pieces; a paragraph cut is preferred to a sentence cut unless far less balanced.
PIECE_COST = 10.0
SHORT_COST = 25.0
BALANCE_COST = 3.0
_PARAGRAPH, _LINE, _SENTENCE, _CLAUSE, _WORD, _CHAR = range(6)
_CUT_COST = (0.0, 1.0, 2.0, 6.0, 40.0, 60.0)
_SENTENCE_END = frozenset(".!?。！？…\"'”’)）」』")
_CLAUSE_END = frozenset(";；,，、:：")
# Formats whose every line names its own path ("backup.retention_days: 14"): a small file of
# these is one chunk, not a piece per key that holds half an answer.
SELF_DESCRIBING_FORMATS = frozenset({"json", "jsonl"})


@dataclass(frozen=True)
class Chunk:
    """One retrievable piece of a document. `index` is its position in the document (0-based);
    `parent` is the index of its parent passage in parent_child mode, else None."""

    index: int
    text: str
    headings: tuple[str, ...]
    page: int | None
    parent: int | None = None

    @property
    def heading(self) -> str:
        return HEADING_SEPARATOR.join(self.headings)

    @property
    def embed_text(self) -> str:
        return f"{self.heading}\n{self.text}" if self.headings else self.text


@dataclass(frozen=True)
class ChunkedDocument:
    chunks: tuple[Chunk, ...]
    parents: tuple[str, ...] = ()  # parent passages (parent_child mode), referenced by Chunk.parent


def chunk_document(document: Document, settings: CreationSettings) -> ChunkedDocument:
    document = _whole_if_small(document, settings.chunk_size)
    if settings.chunking == "parent_child":
        return _parent_child(document, settings)
    size, overlap = settings.chunk_size, settings.chunk_overlap
    pieces: list[tuple[str, Section]] = []
    if settings.chunking == "fixed":
        for section in document.sections:
            pieces.extend((text, section) for text in _fixed_windows(section.text, size, overlap))
            _check_count(len(pieces), settings)
    else:
        for section in _with_title(document, size):
            pieces.extend((text, section) for text in split_section(section, size, overlap))
            _check_count(len(pieces), settings)
    chunks = tuple(
        Chunk(index=i, text=text, headings=section.headings, page=section.page)
        for i, (text, section) in enumerate(pieces)
    )
    return ChunkedDocument(chunks)


def _whole_if_small(document: Document, size: int) -> Document:
    """A JSON / JSONL file whose whole text fits one chunk becomes one headless section."""
    if document.format not in SELF_DESCRIBING_FORMATS or len(document.sections) < 2:
        return document
    text = document.text
    if len(text) > size:
        return document
    first = document.sections[0]
    return replace(document, sections=(Section(text, (), first.page),))


def with_title_line(document: Document, size: int) -> Document:
    """The document with a headless text's title line made the heading of the text under it
    (`_with_title`): what `document_name` reads, so a .txt's title line is its name too."""
    return replace(document, sections=_with_title(document, size))


# A plain-text document's first line is its title when it is short (TITLE_MAX_CHARS), does not
# end in a clause mark ("Note:", "First,": the text has begun) and a blank line separates it from
# the text (the usual "Title\n\nText" of .txt files). A sentence mark does not make it text: an
# FAQ's question titles its answer, a paper's title may end with a period, a name with its
# abbreviation ("Liver function tests (LFT)"). When such lines counted as text, only the first
# passage held them: MedQuAD FAQ entries (1,471 of 1,935 files: questions, bracketed names)
# nDCG@10 vector 0.6428 -> 0.6672, keyword 0.5236 -> 0.5747, hybrid 0.6474 -> 0.6671; SciFact
# (1,657 titles ending in a period) vector 0.7259 -> 0.7381, hybrid 0.7839 -> 0.7855
# (docs/BENCHMARKS.md).
def _with_title(document: Document, size: int) -> tuple[Section, ...]:
    """Make a headless document's title line the heading of the text under it, so it stays with
    that text in every chunk (embedding and display) and is scored as a heading field. Not in
    JSON / JSONL, whose first line is a "key: value" of the data."""
    sections = document.sections
    if not sections or document.format in SELF_DESCRIBING_FORMATS:
        return sections
    first = sections[0]
    if first.headings or first.is_table:
        return sections
    text = first.text.strip()
    match = re.match(r"([^\n]+)\n[ \t]*\n\s*(\S[\s\S]*)", text)
    if match is None:
        return sections
    title, body = match.group(1).strip(), match.group(2)
    if not title or len(title) > min(TITLE_MAX_CHARS, size // 2) or title[-1] in _CLAUSE_END:
        return sections
    return (Section(body, (title,), first.page, first.is_table), *sections[1:])


def split_section(section: Section, size: int, overlap: int) -> list[str]:
    """Split one section's text into pieces of at most `size` characters."""
    if section.is_table:
        return split_table(section.text, size)
    return split_text(section.text, size, overlap)


def split_text(text: str, size: int, overlap: int) -> list[str]:
    """Pieces of at most `size` characters that stand on their own (see `_pack`); a text of up
    to WHOLE_SLACK × size stays whole. Each piece after the first starts with up to `overlap`
    characters of whole sentences (or clauses) from the end of the piece before it, as far as
    it stays within `size`."""
    text = text.strip()
    if not text:
        return []
    if len(text) <= size * WHOLE_SLACK:
        return [text]
    pieces: list[str] = []
    for run, breakable in bounded_runs(text, size, overlap):
        pieces.extend(_pack_text(run, size, overlap) if breakable else _fixed_windows(run, size, overlap))
    return [p for p in pieces if p.strip()]


def _pack_text(text: str, size: int, overlap: int) -> list[str]:
    """`text` (no line longer than the splitter handles in linear time) packed into pieces."""
    atoms = _atoms(text, size)
    spans = _pack(atoms, size)
    pieces: list[str] = []
    for k, (first, last) in enumerate(spans):
        start, end = atoms[first].start, atoms[last].end
        if k and overlap > 0:  # the overlap never makes a piece longer than size
            start = _overlap_start(atoms, spans[k - 1], first, min(overlap, size - (end - start)))
        pieces.append(text[start:end])
    return pieces


def bounded_runs(text: str, size: int, overlap: int) -> list[tuple[str, bool]]:
    """Guard for the splitter: cut every line longer than LONG_LINE_FACTOR × size into runs.

    semantic-text-splitter's time grows with the square of a stretch that has no line or sentence
    boundary (a 2 MB line without whitespace took 90 s). A long line is cut at its last sentence
    end, else whitespace, else clause mark in the second half of each window; a window with none
    of these is an unbreakable run, returned with breakable=False and cut into fixed windows by
    the caller (what the splitter would do, in linear time). Runs are consecutive slices of
    `text`; unbreakable runs overlap by `overlap` characters, like their fixed windows."""
    limit = LONG_LINE_FACTOR * size
    if len(text) <= limit:
        return [(text, True)]
    runs: list[tuple[str, bool]] = []
    stretch = 0  # start of the pending run of short lines
    pos, end_of_text = 0, len(text)
    while pos < end_of_text:
        end = text.find("\n", pos)
        end = end_of_text if end < 0 else end
        if end - pos > limit:
            if pos > stretch:
                runs.append((text[stretch:pos], True))
            runs.extend(_cut_long_line(text[pos:end], size, overlap, limit))
            stretch = end
        pos = end + 1
    if stretch < end_of_text:
        runs.append((text[stretch:], True))
    return runs


def _cut_long_line(line: str, size: int, overlap: int, limit: int) -> list[tuple[str, bool]]:
    step = size - overlap
    hard = max(1, (limit - overlap) // step) * step  # advance of one unbreakable run
    runs: list[tuple[str, bool]] = []
    pos = 0
    while len(line) - pos > limit:
        cut = _last_break(line, pos + limit // 2, pos + limit)
        if cut is None:
            runs.append((line[pos : pos + hard + overlap], False))
            pos += hard
        else:
            runs.append((line[pos:cut], True))
            pos = cut
    runs.append((line[pos:], True))
    return runs


def _last_break(line: str, start: int, stop: int) -> int | None:
    """End of the last sentence end, else whitespace, else clause mark in line[start:stop]."""
    for pattern in _RUN_BREAKS:
        last = None
        for last in pattern.finditer(line, start, stop):
            pass
        if last is not None:
            return last.end()
    return None


def split_table(text: str, size: int) -> list[str]:
    """Split a Markdown table by rows; each piece starts with the header (and separator) rows."""
    lines = [line for line in text.strip().split("\n") if line.strip()]
    if not lines:
        return []
    header_len = 2 if len(lines) > 1 and _is_separator_row(lines[1]) else 1
    header = "\n".join(lines[:header_len])
    if len(lines) == header_len:
        return split_text(header, size, 0)
    if len(header) > size * WIDE_TABLE_HEADER_SHARE and _CELL_BORDER.search(lines[0].strip().strip("|")):
        # A group's two header lines can still exceed that share (for chunks under ~200
        # characters, or one-letter column names): its rows are split as they are, never
        # grouped again (that recursed forever).
        groups = column_groups(lines, header_len, size)
        return [piece for group in groups for piece in _split_rows(group.split("\n"), 2, size)]
    return _split_rows(lines, header_len, size)


def _split_rows(lines: list[str], header_len: int, size: int) -> list[str]:
    """A table's rows in pieces of at most `size` characters (unless the header leaves less than
    a quarter of it), each starting with the table's first `header_len` lines."""
    header = "\n".join(lines[:header_len])
    rows = lines[header_len:]
    budget = max(size - len(header) - 1, size // 4)
    pieces: list[str] = []
    current: list[str] = []
    used = 0
    for row in rows:
        if len(row) > budget:  # one huge row: give it its own pieces, each with the header
            if current:
                pieces.append(header + "\n" + "\n".join(current))
                current, used = [], 0
            pieces.extend(header + "\n" + part for part in split_text(row, budget, 0))
            continue
        if current and used + len(row) + 1 > budget:
            pieces.append(header + "\n" + "\n".join(current))
            current, used = [], 0
        current.append(row)
        used += len(row) + 1
    if current:
        pieces.append(header + "\n" + "\n".join(current))
    return pieces


def column_groups(lines: list[str], header_len: int, size: int) -> list[str]:
    """Guard for wide tables: cut a table whose header does not fit in a chunk into narrower
    tables of consecutive columns, each repeating the first (key) column.

    Repeating a 5,000-column header in every piece sent 57 million characters to the embedding
    model for a 154 KB CSV. Each group's header line fits in a quarter of a chunk (in 3 clipped
    cells for small chunks) and, with its separator line, in the share of a chunk a table header
    may take, unless the group is a single column; so the pieces split_table cuts from it stay
    within a small constant factor of the table's own text and rows are not cut apart. Rows with
    no value in a group are left out of it."""
    header = _cells(lines[0])
    rows = [_cells(line) for line in lines[header_len:]]
    width = max(len(header), max((len(r) for r in rows), default=0), 2)
    cell_limit = max(16, size // 16)
    names = [_clip(name, cell_limit) for name in header] + [""] * (width - len(header))
    target = max(size // 4, 3 * cell_limit)
    header_room = size * WIDE_TABLE_HEADER_SHARE
    bounds: list[tuple[int, int]] = []  # [start, end) columns of each group after the key column
    start = 1
    while start < width:
        end, used = start + 1, len(names[0]) + len(names[start]) + 7
        while end < width:
            line = used + len(names[end]) + 3
            separator = 4 * (end - start + 2) + 1  # "|---" per column of the wider group, and "|"
            if line > target or line + 1 + separator > header_room:
                break
            used, end = line, end + 1
        bounds.append((start, end))
        start = end
    bodies: list[list[str]] = [[] for _ in bounds]
    for row in rows:  # each row visits only the groups it reaches: linear in the table's text
        if not any(row):
            continue
        # The first group carries the whole key cell, and rows with nothing but a key.
        bodies[0].append(f"| {row[0]} | " + " | ".join(row[1 : bounds[0][1]]) + " |")
        key = _clip(row[0], cell_limit)
        for group, (start, end) in enumerate(bounds[1:], start=1):
            if start >= len(row):
                break
            if any(row[start:end]):
                bodies[group].append(f"| {key} | " + " | ".join(row[start:end]) + " |")
    groups: list[str] = []
    for (start, end), body in zip(bounds, bodies):
        if body:
            head = f"| {names[0]} | " + " | ".join(names[start:end]) + " |"
            groups.append("\n".join([head, "|---" * (end - start + 1) + "|", *body]))
    return groups


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table row (escaped pipes stay inside their cell)."""
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [cell.strip() for cell in _CELL_BORDER.split(line)]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _parent_child(document: Document, settings: CreationSettings) -> ChunkedDocument:
    parents: list[str] = []
    chunks: list[Chunk] = []
    child_size = max(settings.chunk_size // 2, 64)
    child_overlap = min(settings.chunk_overlap, child_size // 4)
    for section in document.sections:
        for parent_text in split_section(section, settings.parent_size, 0):
            parent_index = len(parents)
            parents.append(parent_text)
            children = (
                split_table(parent_text, child_size)
                if section.is_table
                else split_text(parent_text, child_size, child_overlap)
            )
            for child in children:
                chunks.append(Chunk(len(chunks), child, section.headings, section.page, parent_index))
            _check_count(len(chunks), settings)
    return ChunkedDocument(tuple(chunks), tuple(parents))


def _check_count(chunks: int, settings: CreationSettings) -> None:
    if chunks > limits.MAX_CHUNKS_PER_FILE:
        raise too_many_chunks(settings)


def too_many_chunks(settings: CreationSettings) -> LimitExceeded:
    """Past limits.MAX_CHUNKS_PER_FILE passages (parent_child: the embedded child passages)."""
    return LimitExceeded(
        f"This file makes more than {limits.MAX_CHUNKS_PER_FILE:,} passages at this knowledge base's chunk "
        f"size of {settings.chunk_size:,} characters ({settings.chunking} chunking), the most LucidRAG indexes "
        "from one file (MAX_CHUNKS_PER_FILE): each passage is embedded by the embedding model and stored as a "
        "vector. Split it into smaller files and upload them separately (for long text, a knowledge base "
        "created with a larger chunk_size makes fewer passages).")


def _fixed_windows(text: str, size: int, overlap: int) -> list[str]:
    text = text.strip()
    step = size - overlap
    return [text[i : i + size] for i in range(0, max(len(text) - overlap, 1), step) if text[i : i + size].strip()]


@dataclass(frozen=True)
class _Atom:
    start: int
    end: int
    cut: int  # strength of the boundary after this atom (_PARAGRAPH ... _CHAR)


def _atoms(text: str, size: int) -> list[_Atom]:
    """Small units (at most size/8 characters) that a cut may fall between, each with the kind of
    boundary that follows it, from semantic-text-splitter's own boundaries."""
    spans = _splitter_spans(text, max(16, size // 8), size)
    atoms: list[_Atom] = []
    for (start, end), (next_start, _) in zip(spans, spans[1:] + [(len(text), 0)]):
        gap = text[end:next_start]
        last = text[end - 1]
        if "\n" in gap:
            cut = _PARAGRAPH if re.search(r"\n[ \t]*\n", gap) else _LINE
        elif last in _SENTENCE_END:
            cut = _SENTENCE
        elif last in _CLAUSE_END:
            cut = _CLAUSE
        else:
            cut = _WORD if gap else _CHAR
        atoms.append(_Atom(start, end, cut))
    return atoms


def _splitter_spans(text: str, capacity: int, size: int) -> list[tuple[int, int]]:
    """semantic-text-splitter's chunks of `text` (at most `capacity` characters), as (start, end)
    offsets, found block by block: the splitter is never handed more than
    SPLITTER_BLOCK_FACTOR × size characters.

    The splitter rescans the rest of its input for every chunk it cuts, so its time grows with
    the square of the text when the text has many short lines (9.5 MB of "ab\n" ran for over
    half an hour). A block ends at a line break in its second half; its chunks that end within
    `size` of that cut are dropped and the next block starts where the last one kept ends. The
    splitter cuts each chunk from where the one before ended and only looks about `capacity`
    characters ahead, so the chunks are those of the whole text."""
    block = SPLITTER_BLOCK_FACTOR * size
    splitter = _splitter(capacity, 0)
    spans: list[tuple[int, int]] = []
    start = 0
    while True:
        last_block = len(text) - start <= block
        stop = len(text) if last_block else _block_end(text, start + block // 2, start + block)
        found = [(start + o, start + o + len(c)) for o, c in splitter.chunk_indices(text[start:stop])]
        if last_block:
            return spans + found
        kept = [span for span in found if span[1] <= stop - size] or found[:1]
        if not kept:  # nothing but whitespace in this block
            start = stop
            continue
        spans.extend(kept)
        start = kept[-1][1]


def _block_end(text: str, low: int, high: int) -> int:
    """The last line break in text[low:high] (just after it), else high."""
    cut = text.rfind("\n", low, high)
    return high if cut < 0 else cut + 1


def _pack(atoms: list[_Atom], size: int) -> list[tuple[int, int]]:
    """Cheapest split of the atoms into pieces of at most `size` characters (dynamic
    programming over the cut positions): few pieces, cut at the strongest boundaries, no
    fragment under size/4 where that can be avoided, pieces about equally full."""
    n = len(atoms)
    best = [0.0] + [float("inf")] * n  # best[i]: cost of atoms[:i]
    back = [0] * (n + 1)
    short = size / 4
    for i in range(1, n + 1):
        end = atoms[i - 1].end
        cut = 0.0 if i == n else _CUT_COST[atoms[i - 1].cut]
        j = i - 1
        while j >= 0:
            length = end - atoms[j].start
            if length > size and j < i - 1:
                break
            cost = best[j] + PIECE_COST + cut + BALANCE_COST * (1.0 - min(length, size) / size) ** 2
            if length < short:
                cost += SHORT_COST
            if cost < best[i]:
                best[i], back[i] = cost, j
            j -= 1
    spans: list[tuple[int, int]] = []
    i = n
    while i > 0:
        spans.append((back[i], i - 1))
        i = back[i]
    return spans[::-1]


def _overlap_start(atoms: list[_Atom], previous: tuple[int, int], first: int, overlap: int) -> int:
    """Start of the longest run of whole sentences/clauses ending the previous piece that fits in
    `overlap` characters (no overlap when even its last sentence is longer)."""
    start = atoms[first].start
    for j in range(first - 1, previous[0], -1):
        if atoms[first].start - atoms[j].start > overlap:
            break
        if atoms[j - 1].cut <= _CLAUSE:
            start = atoms[j].start
    return start


def _is_separator_row(line: str) -> bool:
    return bool(re.fullmatch(r"\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*", line))


@lru_cache(maxsize=32)
def _splitter(size: int, overlap: int) -> TextSplitter:
    return TextSplitter(size, overlap=overlap, trim=True)
