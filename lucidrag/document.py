"""The parsed form of an uploaded file: what every parser returns and the chunker consumes."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Section:
    """A run of text under one heading path.

    `headings` is the path from the document root ("Guide", "Install", "Linux"); empty for text
    before the first heading. `page` is 1-based where the format has pages (PDF, slides, sheets).
    `is_table` marks text that is a table rendered as Markdown rows: the chunker repeats its header
    row in every piece it cuts from it.
    """

    text: str
    headings: tuple[str, ...] = ()
    page: int | None = None
    is_table: bool = False


@dataclass(frozen=True)
class Document:
    """A parsed file: ordered sections plus the format it was parsed as (e.g. "pdf", "docx")."""

    sections: tuple[Section, ...]
    format: str
    metadata: dict[str, str | int] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n\n".join(s.text for s in self.sections if s.text)

    def is_blank(self) -> bool:
        return not any(s.text.strip() for s in self.sections)
