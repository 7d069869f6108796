"""The parsed form of an uploaded file: what every parser returns and the chunker consumes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Section:
    """A run of text under one heading path.

    `headings` is the path from the document root ("Guide", "Install", "Linux"); empty for text
    before the first heading. `page` is 1-based where the format has pages (PDF, slides, sheets).
    `is_table` marks text that is a table rendered as Markdown rows: the chunker repeats its header
    row in every piece it cuts from it. `picture` (PNG) marks a placeholder for a picture in which
    OCR found no text: ingest replaces it with the vision model's description or drops it.
    """

    text: str
    headings: tuple[str, ...] = ()
    page: int | None = None
    is_table: bool = False
    picture: bytes | None = None


@dataclass(frozen=True)
class Document:
    """A parsed file: ordered sections plus the format it was parsed as (e.g. "pdf", "docx").
    `title` is the file's own title metadata (PDF Info, DOCX/PPTX core properties), if any.
    `named_by_heading` is False where the first heading does not name the file (an untitled FAQ's
    is its first question)."""

    sections: tuple[Section, ...]
    format: str
    metadata: dict[str, str | int] = field(default_factory=dict)
    title: str = ""
    named_by_heading: bool = True

    @property
    def text(self) -> str:
        return "\n\n".join(s.text for s in self.sections if s.text)


MAX_NAME = 120
# Titles that office tools write on their own; they name nothing.
_PLACEHOLDER_TITLES = re.compile(
    r"^(untitled|no title|title|document\d*|presentation\d*|powerpoint presentation|slide \d+|"
    r"无标题|未命名|新建.*|演示文稿\d*|文档\d*)$", re.IGNORECASE)
_TOOL_PREFIX = re.compile(r"^microsoft (word|powerpoint|excel) - ", re.IGNORECASE)


def document_name(document: Document, ingested_at: datetime) -> str:
    """A human title for the file: its title metadata, else its first heading, else
    "<FORMAT> file, <UTC time to the second>" (two untitled uploads of one day stay apart, as failed
    ones do). LangBot knows only a storage key, so this is what the operator reads."""
    return document_title(document) or (
        f"{(document.format or 'unknown').upper()} file, {ingested_at.strftime('%Y-%m-%d %H:%M:%S')} UTC")


def document_title(document: Document) -> str:
    """The document's own title: its title metadata, else its first heading (where that names it),
    else ""."""
    title = _clean_title(document.title)
    if title or not document.named_by_heading:
        return title
    for section in document.sections:
        for heading in section.headings:
            heading = _clean_title(heading)
            if heading:
                return heading
    return ""


def _clean_title(text: str) -> str:
    text = " ".join((text or "").split())
    text = _TOOL_PREFIX.sub("", text)
    if not text or _PLACEHOLDER_TITLES.match(text):
        return ""
    return text if len(text) <= MAX_NAME else text[: MAX_NAME - 1].rstrip() + "…"
