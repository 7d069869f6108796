"""Spreadsheets (.xlsx/.xlsm/.xls/.xlsb/.ods via python-calamine) and delimited text (.csv/.tsv).

Each sheet becomes one Markdown table section (header = first non-empty row, page = sheet
number, heading = sheet name). Rows are streamed and rendered one at a time."""

from __future__ import annotations

import csv
import datetime as dt
import io
import logging

from lucidrag.base.errors import ParseError
from lucidrag.ingestion.document import Document, Section

from ._common import TableWriter
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


def parse_spreadsheet(data: bytes, ext: str = ".xlsx") -> Document:
    from python_calamine import CalamineError, CalamineWorkbook, PasswordError

    label = ext.lstrip(".") or "spreadsheet"
    if data.startswith(_OLE_MAGIC) and ext in (".xlsx", ".xlsm", ".xlsb") and \
            "EncryptedPackage".encode("utf-16-le") in data[:1 << 20]:
        raise ParseError(ENCRYPTED)
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

    sections: list[Section] = []
    skipped: list[str] = []
    try:
        for number, name in enumerate(workbook.sheet_names, start=1):
            try:
                sheet = workbook.get_sheet_by_name(name)
                writer = TableWriter()
                add_row = writer.add_row
                for row in sheet.iter_rows():
                    add_row([v if type(v) is str else format_cell(v) for v in row])
            except CalamineError as exc:
                logger.warning("sheet %d skipped: %s", number, type(exc).__name__)
                skipped.append(name)
                continue
            if writer.lines:
                sections.append(Section(text=writer.render(), headings=(name.strip() or f"Sheet {number}",),
                                        page=number, is_table=True))
    finally:
        workbook.close()
    if not sections:
        if skipped:
            raise ParseError(f"No sheet of this .{label} file could be read ({len(skipped)} damaged). "
                             "Re-save it in Excel/WPS/LibreOffice and upload it again.")
        raise ParseError(f"This .{label} spreadsheet has no data: every sheet is empty.")
    fmt = {".xls": "xls", ".ods": "ods", ".xlsb": "xlsb"}.get(ext, "xlsx")
    return Document(sections=tuple(sections), format=fmt,
                    metadata={"sheet_count": len(workbook.sheet_names)})


def parse_delimited(data: bytes, ext: str = ".csv") -> Document:
    label = f"{ext} file" if ext else "file"
    text = decode_text(data, label=label)
    if text.startswith("\ufeff"):
        text = text[1:]
    require_content(text, label)
    delimiter = "\t" if ext == ".tsv" else _sniff(text)
    writer = TableWriter()
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        for row in reader:
            writer.add_row(row)
    except csv.Error as exc:
        raise ParseError(f"This {label} is malformed near line {reader.line_num} ({exc}). "
                         "Re-export it as CSV and upload it again.") from None
    if not writer.lines:
        raise ParseError(f"This {label} has no data rows.")
    return Document(sections=(Section(text=writer.render(), is_table=True),),
                    format="tsv" if delimiter == "\t" else "csv")


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
