"""OCR'd pages → Sections, like a native document's: a heading starts a heading path, a table is an
`is_table` Markdown section (the chunker repeats its header row in every piece), and a table that
opens a page with the columns of the table that closed the page before is its continuation, given
that table's header."""

from __future__ import annotations

from lucidrag.ingestion.document import Section

from ._common import HeadingStack, clean_text, render_table
from .ocr_layout import Block


class OcrSections:
    def __init__(self, stack: HeadingStack | None = None) -> None:
        self.stack = stack if stack is not None else HeadingStack()
        self._header: tuple[str, ...] | None = None  # of a table that ended the last page

    def page(self, blocks: tuple[Block, ...], page: int | None) -> list[Section]:
        out: list[Section] = []
        paragraphs: list[str] = []
        closing_header: tuple[str, ...] | None = None

        def flush() -> None:
            text = clean_text("\n\n".join(paragraphs))
            if text:
                out.append(Section(text=text, headings=self.stack.path, page=page))
            paragraphs.clear()

        for index, block in enumerate(blocks):
            closing_header = None
            if block.kind == "heading":
                flush()
                self.stack.push(block.level, block.text)
            elif block.kind == "table":
                flush()
                rows = block.rows
                if index == 0 and self._continues(rows):
                    rows = (self._header, *rows)  # type: ignore[assignment]
                out.append(Section(text=render_table([list(r) for r in rows]), headings=self.stack.path,
                                   page=page, is_table=True))
                closing_header = rows[0]
            else:
                paragraphs.append(block.text)
        flush()
        self._header = closing_header
        return out

    def _continues(self, rows: tuple[tuple[str, ...], ...]) -> bool:
        """Rows of the same width as the last page's closing table, the first not a header (it
        has a figure in it, or repeats nothing of the header)."""
        if self._header is None or not rows or len(rows[0]) != len(self._header) or rows[0] == self._header:
            return False
        return any(any(ch.isdigit() for ch in cell) for cell in rows[0]) \
            and not any(any(ch.isdigit() for ch in cell) for cell in self._header)
