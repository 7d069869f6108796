"""Helpers every format parser shares: text cleaning, heading paths, section building and
Markdown table rendering."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from lucidrag.base.errors import ParseError
from lucidrag.base.limits import MAX_HEADING_CHARS, PAD_COLUMNS
from lucidrag.ingestion.document import Section

# Control characters are removed; vertical tab / form feed / NEL / LS / PS become newlines.
_NEWLINE_LIKE_RE = re.compile("[\x0b\x0c\x85\u2028\u2029]")  # (a regex: str.translate is per character)
_CONTROL_RE = re.compile(
    "[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\u00ad\u200b\u2060\ufeff\ufff9-\ufffb\ufffe\uffff\ud800-\udfff]"
)
_TRAILING_WS_RE = re.compile(r"[ \t\u3000]+\n")
_MANY_BLANK_LINES_RE = re.compile(r"\n{3,}")


_CJK = (
    "\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u3190-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
)
_CJK_CHAR = re.compile(f"[{_CJK}]")
# Punctuation that may sit at the end of a wrapped CJK line (not sentence-final).
_CJK_SOFT_PUNCT = "，、；：（《“‘「『【〔"


def is_cjk(ch: str) -> bool:
    """A CJK character (or a CJK comma-like mark): line breaks between two of them are dropped."""
    return bool(_CJK_CHAR.match(ch)) or ch in _CJK_SOFT_PUNCT


@contextmanager
def opening_package(damaged: Callable[[str], ParseError], not_a_package: type[Exception], ext: str) -> Iterator[None]:
    """What python-docx / python-pptx raise while opening a broken file, as the format's
    `damaged` message (`not_a_package`: the library's PackageNotFoundError)."""
    try:
        yield
    except (not_a_package, zipfile.BadZipFile) as exc:
        raise damaged(f"not a valid {ext} package") from exc
    except KeyError as exc:
        raise damaged(f"missing part {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - lxml / opc errors of every kind
        raise damaged(type(exc).__name__) from exc


# The text of a picture placeholder section (Section.picture) until ingest replaces or drops it.
PICTURE_PLACEHOLDER = "[Picture]"


def normalize_newlines(text: str) -> str:
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def clean_text(text: str) -> str:
    """Normalise newlines, drop control characters, trailing spaces and runs of blank lines.

    Everything else (case, punctuation, indentation) is kept as it is."""
    if not text:
        return ""
    text = _NEWLINE_LIKE_RE.sub("\n", normalize_newlines(text))
    text = _CONTROL_RE.sub("", text)
    text = _TRAILING_WS_RE.sub("\n", text)
    text = _MANY_BLANK_LINES_RE.sub("\n\n", text)
    return text.strip("\n").rstrip()


def clean_inline(text: str) -> str:
    """Clean a short single-line value (a heading, a table cell): whitespace runs become one space."""
    return " ".join(_CONTROL_RE.sub("", _NEWLINE_LIKE_RE.sub("\n", normalize_newlines(text))).split())


def clip_heading(title: str) -> str:
    """Headings are prefixed to every chunk under them: a 100,000-character heading over a
    long section would multiply the text sent to the embedding model."""
    return title if len(title) <= MAX_HEADING_CHARS else title[: MAX_HEADING_CHARS - 1] + "…"


class HeadingStack:
    """Turns a stream of (level, title) headings into heading paths."""

    def __init__(self) -> None:
        self._stack: list[tuple[int, str]] = []
        self.path: tuple[str, ...] = ()

    def push(self, level: int, title: str) -> tuple[str, ...]:
        title = clip_heading(clean_inline(title))
        if not title:
            return self.path
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._stack.append((level, title))
        self.path = tuple(title for _, title in self._stack)
        return self.path


class SectionBuilder:
    """Collects paragraphs under the current heading path; a heading or a table closes the run."""

    def __init__(self, prefix: tuple[str, ...] = (), page: int | None = None) -> None:
        self.sections: list[Section] = []
        self._prefix = prefix
        self._page = page
        self._headings = HeadingStack()
        self._buffer: list[str] = []
        self._titles: list[str] = []

    @property
    def headings(self) -> tuple[str, ...]:
        return self._prefix + self._headings.path

    def heading(self, level: int, title: str) -> None:
        self.flush()
        self._headings.push(level, title)
        self._titles.append(clean_inline(title))

    def text(self, text: str) -> None:
        if text and text.strip():
            self._buffer.append(text)

    def table(self, markdown: str, page: int | None = None) -> None:
        self.flush()
        self.add(markdown, is_table=True, page=page)

    def add(self, text: str, *, is_table: bool = False, page: int | None = None) -> None:
        text = clean_text(text)
        if text:
            self.sections.append(
                Section(text=text, headings=self.headings, page=page if page is not None else self._page,
                        is_table=is_table)
            )

    def picture(self, png: bytes) -> None:
        """A placeholder for a picture without text, where it sits (see Section.picture)."""
        self.flush()
        self.sections.append(Section(text=PICTURE_PLACEHOLDER, headings=self.headings, page=self._page,
                                     picture=png))

    def flush(self) -> None:
        if self._buffer:
            self.add("\n\n".join(self._buffer))
            self._buffer = []

    def finish(self) -> list[Section]:
        self.flush()
        if not self.sections and any(self._titles):
            # Only headings and no body text: keep the headings themselves as the text.
            self.sections.append(Section(text="\n".join(t for t in self._titles if t),
                                         headings=self._prefix, page=self._page))
        return self.sections


# ---------------------------------------------------------------------------------------------
# Markdown tables (spreadsheets, CSV, Word and slide tables share this)

_CELL_ESCAPE = str.maketrans({"|": "\\|", "\n": " ", "\r": " ", "\t": " "})
_SEP = "\x1f"  # joins a row's cells before one translate() call turns it into " | "
_ROW_ESCAPE = str.maketrans({_SEP: " | ", "|": "\\|", "\n": " ", "\r": " ", "\t": " "})


def md_cell(value: str) -> str:
    """A table cell: pipes escaped, line breaks and tabs turned into spaces."""
    return value.translate(_CELL_ESCAPE)


def md_row(cells: list[str]) -> str:
    joined = _SEP.join(cells)
    if joined.count(_SEP) != len(cells) - 1:  # a cell holds the separator itself
        return "| " + " | ".join(md_cell(c) for c in cells) + " |"
    return "| " + joined.translate(_ROW_ESCAPE) + " |"


class TableWriter:
    """Streams rows into Markdown table lines: the first non-empty row is the header.

    Rows are lists of cell strings (escaped here). Empty rows are skipped and trailing empty
    cells trimmed; a short row is padded to the header width so columns line up, unless the
    table is wider than PAD_COLUMNS (padding one-cell rows under a 20,000-column header would
    make the text grow with rows × columns)."""

    __slots__ = ("lines", "_width")

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._width = 0

    def add_row(self, cells: list[str]) -> None:
        end = len(cells)
        while end and not cells[end - 1]:
            end -= 1
        if not end:
            return
        if end != len(cells):
            cells = cells[:end]
        if not self.lines:
            self._width = end
            self.lines.append(md_row(cells))
            self.lines.append(md_row(["---"] * end))
            return
        if end < self._width and self._width <= PAD_COLUMNS:
            cells.extend([""] * (self._width - end))
        self.lines.append(md_row(cells))

    def render(self) -> str:
        return "\n".join(self.lines)


def render_table(rows: Iterable[list[str]]) -> str:
    writer = TableWriter()
    for row in rows:
        writer.add_row(row)
    return writer.render()
