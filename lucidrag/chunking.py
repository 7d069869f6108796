"""Structure-aware splitting of a parsed Document into chunks.

Sections (one heading path each) are never merged, so a chunk never spans two headings. Inside a
section, semantic-text-splitter cuts at the largest boundary that fits `chunk_size` characters:
paragraphs, then lines, then sentences (Unicode sentence rules, which include 。！？), then words
and characters. Tables are split by rows and every piece repeats the header row; tables too
wide for that are cut into column groups first (column_groups), and lines too long for the
splitter are cut into bounded runs first (bounded_runs). Both guards keep the work linear.

Each chunk carries `embed_text`: its heading path ("Guide › Install › Linux") prefixed to its
body, so a chunk stands on its own when embedded, keyword-indexed and shown to the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from semantic_text_splitter import TextSplitter

from .document import Document, Section
from .limits import LONG_LINE_FACTOR, WIDE_TABLE_HEADER_SHARE
from .settings import CreationSettings

HEADING_SEPARATOR = " › "
# Clause ends that the Unicode sentence rules ignore; used only when a sentence is too long.
_CJK_CLAUSE_END = re.compile(r"(?<=[；;，,、：:])")
_CELL_BORDER = re.compile(r"(?<!\\)\|")
_RUN_BREAKS = (
    re.compile(r"[.!?。！？…]+[\"'”’)）\]]*(?:\s+|(?=[^\x00-\x7f]))"),  # sentence end (Latin needs a space)
    re.compile(r"\s+"),
    re.compile(r"[；;，,、：:]+"),
)


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
    if settings.chunking == "parent_child":
        return _parent_child(document, settings)
    size, overlap = settings.chunk_size, settings.chunk_overlap
    pieces: list[tuple[str, Section]] = []
    if settings.chunking == "fixed":
        for section in document.sections:
            pieces.extend((text, section) for text in _fixed_windows(section.text, size, overlap))
    else:
        for section in document.sections:
            pieces.extend((text, section) for text in split_section(section, size, overlap))
    chunks = tuple(
        Chunk(index=i, text=text, headings=section.headings, page=section.page)
        for i, (text, section) in enumerate(pieces)
    )
    return ChunkedDocument(chunks)


def split_section(section: Section, size: int, overlap: int) -> list[str]:
    """Split one section's text into pieces of at most `size` characters."""
    if section.is_table:
        return split_table(section.text, size)
    return split_text(section.text, size, overlap)


def split_text(text: str, size: int, overlap: int) -> list[str]:
    text = text.strip()
    if not text:
        return []
    if len(text) <= size:
        return [text]
    pieces: list[str] = []
    for run, breakable in bounded_runs(text, size, overlap):
        if not breakable:
            pieces.extend(_fixed_windows(run, size, overlap))
            continue
        for piece in _splitter(size, overlap).chunks(run):
            if len(piece) > size:  # a single sentence longer than size: cut at clause ends
                pieces.extend(_split_long_sentence(piece, size, overlap))
            else:
                pieces.append(piece)
    return [p for p in pieces if p.strip()]


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
    rows = lines[header_len:]
    if not rows:
        return split_text(header, size, 0)
    if len(header) > size * WIDE_TABLE_HEADER_SHARE and _CELL_BORDER.search(lines[0].strip().strip("|")):
        return [piece for group in column_groups(lines, header_len, size) for piece in split_table(group, size)]
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
    model for a 154 KB CSV. Each group's header fits in a quarter of a chunk, so the pieces
    split_table cuts from it stay within a small constant factor of the table's own text; rows
    with no value in a group are left out of it."""
    header = _cells(lines[0])
    rows = [_cells(line) for line in lines[header_len:]]
    width = max(len(header), max((len(r) for r in rows), default=0), 2)
    cell_limit = max(16, size // 16)
    names = [_clip(name, cell_limit) for name in header] + [""] * (width - len(header))
    target = max(size // 4, 3 * cell_limit)
    bounds: list[tuple[int, int]] = []  # [start, end) columns of each group after the key column
    start = 1
    while start < width:
        end, used = start + 1, len(names[0]) + len(names[start]) + 7
        while end < width and used + len(names[end]) + 3 <= target:
            used += len(names[end]) + 3
            end += 1
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
    return ChunkedDocument(tuple(chunks), tuple(parents))


def _fixed_windows(text: str, size: int, overlap: int) -> list[str]:
    text = text.strip()
    step = size - overlap
    return [text[i : i + size] for i in range(0, max(len(text) - overlap, 1), step) if text[i : i + size].strip()]


def _split_long_sentence(sentence: str, size: int, overlap: int) -> list[str]:
    clauses = [c for c in _CJK_CLAUSE_END.split(sentence) if c]
    pieces: list[str] = []
    current = ""
    for clause in clauses:
        if len(clause) > size:
            if current:
                pieces.append(current)
                current = ""
            pieces.extend(_fixed_windows(clause, size, overlap))
        elif len(current) + len(clause) > size:
            pieces.append(current)
            current = clause
        else:
            current += clause
    if current:
        pieces.append(current)
    return pieces


def _is_separator_row(line: str) -> bool:
    return bool(re.fullmatch(r"\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*", line))


@lru_cache(maxsize=32)
def _splitter(size: int, overlap: int) -> TextSplitter:
    return TextSplitter(size, overlap=overlap, trim=True)
