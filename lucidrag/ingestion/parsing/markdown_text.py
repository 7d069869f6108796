"""Markdown: markdown-it-py finds the headings (ATX and setext) and tables; the body between
headings is kept as written in the source."""

from __future__ import annotations

import re
import threading

from lucidrag.ingestion.document import Document, Section

from ._common import SectionBuilder, clean_text, normalize_newlines
from .text import decode_text, require_content

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)


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
    tokens = _parser().parse(text)
    builder = SectionBuilder(prefix=prefix)
    cursor = 0  # next source line not yet emitted

    def emit_body(until: int) -> None:
        nonlocal cursor
        if until > cursor:
            builder.text("\n".join(lines[cursor:until]))
        cursor = max(cursor, until)

    for index, token in enumerate(tokens):
        if token.level != 0 or token.map is None:
            continue
        start, end = token.map
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


def parse_markdown(data: bytes, ext: str = ".md") -> Document:
    label = f"{ext} file" if ext else "file"
    text = clean_text(decode_text(data, label=label))
    require_content(text, label)
    return Document(sections=tuple(markdown_sections(text)), format="markdown")
