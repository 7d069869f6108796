"""Markdown: markdown-it-py finds the headings (ATX and setext) and tables; the body between
headings is kept as written in the source. A long text is handed to it in segments
(`_parsed_segments`): its tokens take ~460 bytes each, three or four per line of headings or short
paragraphs (300,000 headings in 3.6 MB grew the reader by 550 MiB)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

from lucidrag.ingestion.document import Document, Section

from ._common import SectionBuilder, clean_text, normalize_newlines
from .text import decode_text, require_content

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)


# A segment ends at the first line after this many where a top-level block starts (see
# `_parsed_segments`); a text of at most this many lines is parsed whole.
SEGMENT_LINES = 4096
# Blocks that a line at the first column after a blank line does not end (an unclosed fence, a
# <pre> or comment): a segment whose last block is one of these, reaching its end, is cut too early.
_OPEN_ENDED = frozenset({"fence", "html_block"})
_ATX_HEADING = re.compile(r"#{1,6}(?:[ \t]|$)")


_PARSERS = threading.local()  # building one costs ~2 ms; parse() keeps its state per call


def _parser():
    parser = getattr(_PARSERS, "parser", None)
    if parser is None:
        from markdown_it import MarkdownIt

        parser = _PARSERS.parser = MarkdownIt("commonmark").enable("table")
    return parser


def _inline_text(token) -> str:
    if not token.children:
        return token.content
    parts = []
    for child in token.children:
        if child.type in ("text", "code_inline", "html_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts) or token.content


def markdown_sections(text: str, prefix: tuple[str, ...] = ()) -> list[Section]:
    text = normalize_newlines(text)
    match = _FRONT_MATTER.match(text)
    if match and len(match.group(0)) < 8192:
        text = text[match.end():]
    lines = text.split("\n")
    builder = SectionBuilder(prefix=prefix)
    cursor = 0  # next source line not yet emitted

    def emit_body(until: int) -> None:
        nonlocal cursor
        if until > cursor:
            builder.text("\n".join(lines[cursor:until]))
        cursor = max(cursor, until)

    for first, tokens in _parsed_segments(lines):
        for index, token in enumerate(tokens):
            if token.level != 0 or token.map is None:
                continue
            start, end = first + token.map[0], first + token.map[1]
            if token.type == "heading_open":
                emit_body(start)
                inline = tokens[index + 1] if index + 1 < len(tokens) else None
                title = _inline_text(inline) if inline is not None and inline.type == "inline" else ""
                builder.heading(int(token.tag[1]), title)
                cursor = max(cursor, end)
            elif token.type == "table_open":
                emit_body(start)
                builder.table("\n".join(lines[start:end]))
                cursor = max(cursor, end)
    emit_body(len(lines))
    return builder.finish()


def _parsed_segments(lines: list[str]) -> Iterator[tuple[int, list]]:
    """(first line, markdown-it's tokens) of consecutive segments of `lines` that parse as they do
    within the whole text. A segment ends, past SEGMENT_LINES lines, before a line that follows a
    blank one or an ATX heading at the first column and starts at its first column with neither
    whitespace nor ">": such a line ends every paragraph, list item, block quote and indented code
    before it. If the segment's last block is a fence or an HTML block running to its end, the
    cut fell inside it: the segment is parsed again twice as long (a reference link in a heading
    defined in another segment stays "[text]")."""
    first = 0
    while first < len(lines):
        want = SEGMENT_LINES
        while True:
            last = _block_start(lines, first + want)
            if last == len(lines):
                tokens = _parser().parse("\n".join(lines[first:]))
                break
            # (the "\n" makes a blank last line one markdown-it counts: a block still open at
            # the cut runs through it, a closed one ends before it)
            tokens = _parser().parse("\n".join(lines[first:last]) + "\n")
            if not _ends_open(tokens, last - first):
                break
            want *= 2
        yield first, tokens
        first = last


def _block_start(lines: list[str], start: int) -> int:
    for number in range(max(start, 1), len(lines)):
        before = lines[number - 1]
        if lines[number][:1] not in ("", " ", "\t", ">") and (not before.strip() or _ATX_HEADING.match(before)):
            return number
    return len(lines)


def _ends_open(tokens: list, line_count: int) -> bool:
    last = next((t for t in reversed(tokens) if t.level == 0 and t.map is not None), None)
    return last is not None and last.type in _OPEN_ENDED and last.map[1] >= line_count


def parse_markdown(data: bytes, ext: str = ".md") -> Document:
    label = f"{ext} file" if ext else "file"
    text = clean_text(decode_text(data, label=label))
    require_content(text, label)
    return Document(sections=tuple(markdown_sections(text)), format="markdown")
