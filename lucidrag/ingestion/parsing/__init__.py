"""Uploaded file bytes → Document.

    parse_file(data, filename, mime_type="") -> Document
    document_from_parse_result(text, sections) -> Document   (an external Parser plugin's output)
    SUPPORTED_EXTENSIONS

The format comes from the file name's extension, then the MIME type, then magic bytes; each
format family has its own module with its heavy imports inside the parser function. Every error
is a `ParseError` (or `UnsupportedFormatError`) whose message tells the operator what happened
and what to do.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lucidrag.base.errors import ParseError
from lucidrag.ingestion.document import Document, Section

from ._common import HeadingStack, clean_inline, clean_text
from .registry import SUPPORTED_EXTENSIONS, check_document_chars, detect, parse_bytes

__all__ = ["SUPPORTED_EXTENSIONS", "detect", "document_from_parse_result", "parse_file"]


def parse_file(data: bytes, filename: str, mime_type: str = "") -> Document:
    """Parse an uploaded file. `filename` is the host's storage key: only its extension counts."""
    return parse_bytes(bytes(data), filename or "", mime_type or "")


def document_from_parse_result(
    text: str,
    sections: Iterable[Sequence] = (),
    *,
    format: str = "external",
) -> Document:
    """Turn an external Parser plugin's ParseResult into a Document.

    `sections` are (content, heading, level, page) tuples — plain values taken from the SDK's
    TextSection. A section with a heading opens that heading at its level (level ≤ 0 counts as 1)
    and its content belongs under it; heading paths come from the levels. When no section has
    text, the whole `text` becomes one section."""
    stack = HeadingStack()
    out: list[Section] = []
    for item in sections:
        content, heading, level, page = (tuple(item) + (None, None, 0, None))[:4]
        level = level if isinstance(level, int) and level > 0 else 1
        page = page if isinstance(page, int) and page > 0 else None
        if heading and clean_inline(str(heading)):
            stack.push(level, str(heading))
        body = clean_text(str(content or ""))
        if body:
            out.append(Section(text=body, headings=stack.path, page=page))
    if not out:
        body = clean_text(text or "")
        if body:
            out.append(Section(text=body))
    check_document_chars(out)
    if not out:
        raise ParseError("The parser plugin returned no text for this file. Check the file, or "
                         "choose another parser for this knowledge base.")
    return Document(sections=tuple(out), format=format)
