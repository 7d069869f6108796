"""Spreadsheets (.xlsx/.xlsm/.xls/.xlsb/.ods via python-calamine) and delimited text (.csv/.tsv).

Each sheet becomes one Markdown table section (header = first non-empty row), unless its header
names a question and an answer column: then each question–answer pair is a section of its own
(faq.py). A sheet is not a page: passages carry no page number. In a workbook of several sheets
with data each section's heading path starts with its sheet's name; a single sheet adds nothing to
it (its name, unless a default one like "Sheet1", names the file). Rows are streamed one at a time."""

from __future__ import annotations

import csv
import datetime as dt
import io
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace

from lucidrag.base.errors import ParseError
from lucidrag.ingestion.document import Document, Section

from ._common import TableWriter
from .faq import faq_columns, faq_sections
from .binsheetgrid import check_binary_sheet_grids
from .sheetgrid import check_sheet_grids
from .text import decode_text, require_content

logger = logging.getLogger(__name__)

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
ENCRYPTED = ("This spreadsheet is password-protected. Remove the password (File → Info → Protect "
             "Workbook → Encrypt with Password, clear it), save, then upload it again.")


def _float(value: float) -> str:
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


def _datetime(value: dt.datetime) -> str:
    if value.hour == value.minute == value.second == value.microsecond == 0:
        return value.date().isoformat()
    return value.isoformat(sep=" ")


def _timedelta(value: dt.timedelta) -> str:
    seconds = int(value.total_seconds())
    sign = "-" if seconds < 0 else ""
    hours, rest = divmod(abs(seconds), 3600)
    return f"{sign}{hours}:{rest // 60:02d}:{rest % 60:02d}"


_FORMATTERS = {
    str: str,
    int: str,
    float: _float,
    bool: lambda v: "TRUE" if v else "FALSE",
    dt.datetime: _datetime,
    dt.date: dt.date.isoformat,
    dt.time: dt.time.isoformat,
    dt.timedelta: _timedelta,
    type(None): lambda v: "",
}


def format_cell(value: object) -> str:
    """A cell as text: integral floats without ".0", dates ISO, booleans TRUE/FALSE."""
    formatter = _FORMATTERS.get(type(value))
    if formatter is not None:
        return formatter(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, dt.datetime):
        return _datetime(value)
    return str(value)


_DEFAULT_SHEET = re.compile(r"(sheet|工作表|表)\s*\d*", re.IGNORECASE)


def sheet_sections(rows: Iterable[list[str]]) -> list[Section]:
    """A sheet's sections: one per question–answer pair of an FAQ (headed by its question), or one
    table without a heading."""
    rows = iter(rows)
    header = next((row for row in rows if any(cell.strip() for cell in row)), None)
    if header is None:
        return []
    columns = faq_columns(header)
    if columns is not None:
        pairs = list(faq_sections(header, columns, rows))
        if not pairs:
            raise _Unanswered()
        return pairs
    writer = TableWriter()
    writer.add_row(header)
    for row in rows:
        writer.add_row(row)
    return [Section(text=writer.render(), is_table=True)]


class _Unanswered(Exception):
    """A header naming question and answer columns over no row with both."""


def _no_answers(what: str) -> ParseError:
    return ParseError(f"{what} has question and answer columns but no row with both a question and an "
                      "answer. Fill in the answers (or rename the headers if it is not an FAQ), then upload "
                      "it again.")


def _named(sheet: str) -> str:
    """A sheet's own name, or "" for a default one ("Sheet1", "工作表1")."""
    return "" if _DEFAULT_SHEET.fullmatch(sheet) else sheet


def _under_sheets(sheets: list[tuple[str, list[Section]]]) -> list[Section]:
    """The sheets' sections in order, each headed by its sheet's name when several sheets hold data;
    a single table sheet by its own name only (its passages then say it once, as the file's name)."""
    if len(sheets) == 1:
        name, sections = sheets[0]
        if sections[0].is_table and _named(name):
            return [replace(sections[0], headings=(name,))]
        return sections
    return [replace(section, headings=(name, *section.headings)) for name, sections in sheets for section in sections]


def _cells(rows: Iterable[list[object]]) -> Iterator[list[str]]:
    for row in rows:
        yield [v if type(v) is str else format_cell(v) for v in row]


def parse_spreadsheet(data: bytes, ext: str = ".xlsx") -> Document:
    from python_calamine import CalamineError, CalamineWorkbook, PasswordError

    label = ext.lstrip(".") or "spreadsheet"
    if data.startswith(_OLE_MAGIC) and ext in (".xlsx", ".xlsm", ".xlsb") and \
            "EncryptedPackage".encode("utf-16-le") in data[:1 << 20]:
        raise ParseError(ENCRYPTED)
    check_sheet_grids(data, f".{label}")
    check_binary_sheet_grids(data, f".{label}")
    try:
        workbook = CalamineWorkbook.from_filelike(io.BytesIO(data))
    except PasswordError:
        raise ParseError(ENCRYPTED) from None
    except (CalamineError, ValueError, OSError) as exc:
        message = str(exc)
        if "password" in message.lower() or "encrypt" in message.lower():
            raise ParseError(ENCRYPTED) from None
        raise ParseError(
            f"This .{label} spreadsheet is damaged or is not a spreadsheet "
            f"({' '.join(message.split())[:120] or type(exc).__name__}). Open it in "
            "Excel/WPS/LibreOffice, save it as .xlsx again, then upload it."
        ) from None

    sheets: list[tuple[str, list[Section]]] = []  # (name, sections) of the sheets with data
    skipped: list[str] = []
    unanswered: list[str] = []
    try:
        for number, name in enumerate(workbook.sheet_names, start=1):
            try:
                found = sheet_sections(_cells(workbook.get_sheet_by_name(name).iter_rows()))
            except CalamineError as exc:
                logger.warning("sheet %d skipped: %s", number, type(exc).__name__)
                skipped.append(name)
                continue
            except _Unanswered:
                unanswered.append(name)
                continue
            if found:
                sheets.append((name.strip() or f"Sheet {number}", found))
    finally:
        workbook.close()
    if not sheets:
        if skipped:
            raise ParseError(f"No sheet of this .{label} file could be read ({len(skipped)} damaged). "
                             "Re-save it in Excel/WPS/LibreOffice and upload it again.")
        if unanswered:
            raise _no_answers(f"The sheet “{unanswered[0]}” of this .{label} file")
        raise ParseError(f"This .{label} spreadsheet has no data: every sheet is empty.")
    fmt = {".xls": "xls", ".ods": "ods", ".xlsb": "xlsb"}.get(ext, "xlsx")
    # Named by its first sheet with a name of its own; else, like any untitled file, by its format
    # and upload time: never by a heading, which may be an FAQ's first question.
    title = next((named for named in (_named(name) for name, _ in sheets) if named), "")
    return Document(sections=tuple(_under_sheets(sheets)), format=fmt, title=title, named_by_heading=False,
                    metadata={"sheet_count": len(workbook.sheet_names)})


def parse_delimited(data: bytes, ext: str = ".csv") -> Document:
    label = f"{ext} file" if ext else "file"
    text = decode_text(data, label=label)
    if text.startswith("\ufeff"):
        text = text[1:]
    require_content(text, label)
    delimiter = "\t" if ext == ".tsv" else _sniff(text)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        sections = sheet_sections(reader)
    except csv.Error as exc:
        raise ParseError(f"This {label} is malformed near line {reader.line_num} ({exc}). "
                         "Re-export it as CSV and upload it again.") from None
    except _Unanswered:
        raise _no_answers(f"This {label}") from None
    if not sections:
        raise ParseError(f"This {label} has no data rows.")
    # Nothing in it names it (an FAQ's first heading is its first question): named like any
    # untitled file, by its format and upload time.
    return Document(sections=tuple(sections), format="tsv" if delimiter == "\t" else "csv", named_by_heading=False)


def _sniff(text: str) -> str:
    sample = text[:64 * 1024]
    cut = sample.rfind("\n")
    if cut > 0:
        sample = sample[:cut]
    try:
        return csv.Sniffer().sniff(sample, delimiters=",\t;|").delimiter
    except csv.Error:
        lines = sample.split("\n", 20)[:20]
        counts = {d: sum(line.count(d) for line in lines) for d in (",", "\t", ";", "|")}
        best = max(counts, key=counts.get)
        return best if counts[best] else ","
