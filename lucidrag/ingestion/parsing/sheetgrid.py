"""The grid a spreadsheet reader would allocate, counted from the file's XML before it reads it.

calamine builds each sheet as a dense grid from its first to its last non-empty cell (32 bytes per
cell, empty or not): one value at XFD1048576 is 17 billion cells, an allocation that aborts the
process inside Rust. `check_sheet_grids` reads each sheet's XML in bounded chunks and measures that
grid the way calamine does (cells with a value, at the position their `r` attribute names, else
after the previous one), failing a sheet past limits.MAX_SHEET_CELLS before calamine sees it.

    check_sheet_grids(data, label)   .xlsx / .xlsm (sheet XML) and .ods (content.xml); .xls / .xlsb
                                     (binary records) are measured by binsheetgrid.py
"""

from __future__ import annotations

import functools
import io
import posixpath
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass

from lucidrag.base import limits
from lucidrag.base.errors import LimitExceeded

from .archive import damaged_part

_CHUNK = 1 << 20

# The walk, token by token (exact, ~30 ns per byte)
_TOKEN = re.compile(rb'<(/?)(?:\w+:)?(row|c|v|is|f)(?=[\s/>])([^>]*?)(/?)>')
_R = re.compile(rb'\br="([A-Za-z]*)([0-9]*)"')
# The fast bound (~3 ns per byte): every cell written as Excel and most writers do, <c r="B7" …>
_FIRST_REF = b'<c r="'
_REF = re.compile(rb'<c r="([A-Z]{1,3})([1-9][0-9]{0,6})"')

_SHEET = re.compile(rb'<(?:\w+:)?sheet\b[^>]*>')
_ATTR = re.compile(rb'([\w:]+)="([^"]*)"')


@dataclass
class Grid:
    """Bounds of the non-empty cells (0-based, inclusive)."""

    first_row: int = -1
    last_row: int = -1
    first_col: int = -1
    last_col: int = -1

    def add(self, row: int, col: int) -> None:
        if self.first_row < 0:
            self.first_row = self.last_row = row
            self.first_col = self.last_col = col
            return
        self.first_row = min(self.first_row, row)
        self.last_row = max(self.last_row, row)
        self.first_col = min(self.first_col, col)
        self.last_col = max(self.last_col, col)

    @property
    def rows(self) -> int:
        return self.last_row - self.first_row + 1 if self.first_row >= 0 else 0

    @property
    def columns(self) -> int:
        return self.last_col - self.first_col + 1 if self.first_col >= 0 else 0

    @property
    def cells(self) -> int:
        return self.rows * self.columns


def column_number(letters: bytes) -> int:
    """A1-style column letters → 1-based column number (A → 1, XFD → 16,384)."""
    number = 0
    for letter in letters:
        number = number * 26 + letter - 64
    return number


def column_letters(number: int) -> str:
    letters = ""
    while number > 0:
        number, rest = divmod(number - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


# The parts calamine streams rather than holds: read here (archive.check_office_container skips them)
STREAMED_SHEETS = ("xl/worksheets/",)


def check_sheet_grids(data: bytes, label: str) -> None:
    if not data.startswith(b"PK"):
        return
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError):
        return  # calamine reports the damage
    with archive:
        if "content.xml" in archive.namelist() and "xl/workbook.xml" not in archive.namelist():
            _check(archive, "content.xml", label, _ods_grids)  # OpenDocument: every sheet in one part
        for name, part in _sheet_parts(archive):
            _check(archive, part, label, lambda stream, name=name: [(name, measure(stream))])


def _check(archive: zipfile.ZipFile, part: str, label: str, grids) -> None:  # noqa: ANN001
    try:
        with archive.open(part) as stream:
            for name, grid in grids(stream):
                if grid.cells > limits.MAX_SHEET_CELLS:
                    raise grid_too_large(grid, name, label)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
        raise damaged_part(label, part, exc) from None


# OpenDocument: a row or cell repeated N times stands for N of them (calamine expands them)
_ODS_TOKEN = re.compile(rb'<(/?)table:(table|table-row|table-cell|covered-table-cell)(?=[\s/>])([^>]*?)(/?)>')
_ODS_NAME = re.compile(rb'\btable:name="([^"]*)"')
_ODS_ROWS = re.compile(rb'\btable:number-rows-repeated="([0-9]+)"')
_ODS_COLUMNS = re.compile(rb'\btable:number-columns-repeated="([0-9]+)"')


def _ods_grids(stream: io.BufferedIOBase) -> Iterator[tuple[str, Grid]]:
    """Each sheet (table:table) of content.xml and its grid: repeated rows and cells expanded as
    calamine expands them; a cell counts when it has a value type or content (not an empty tag)."""
    name, grid = "", Grid()
    row, col, rows = 0, 0, 1
    for text in _tags(stream):
        for closing, tag, attrs, empty in _ODS_TOKEN.findall(text):
            if tag == b"table":
                if closing:
                    yield name, grid
                else:
                    found = _ODS_NAME.search(attrs)
                    name = found.group(1).decode("utf-8", "replace") if found else ""
                    grid, row = Grid(), 0
            elif tag == b"table-row":
                if closing:
                    row += rows
                else:
                    repeated = _ODS_ROWS.search(attrs)
                    rows, col = int(repeated.group(1)) if repeated else 1, 0
                    if empty:
                        row += rows
            elif not closing:
                repeated = _ODS_COLUMNS.search(attrs)
                columns = int(repeated.group(1)) if repeated else 1
                if not empty or b"office:value-type=" in attrs:
                    grid.add(row, col)
                    grid.add(row + rows - 1, col + columns - 1)
                col += columns


def measure(stream: io.BufferedIOBase) -> Grid:
    """The grid of one sheet's XML read in chunks: a fast upper bound (A1 to the largest row and
    column any cell names, valued or not) when every cell starts with its reference; the exact
    walk when that bound is past the limit or some cell is written otherwise."""
    bound = _fast_bound(stream)
    if bound is not None and bound.cells <= limits.MAX_SHEET_CELLS:
        return bound
    stream.seek(0)
    return _walk(stream)


def _fast_bound(stream: io.BufferedIOBase) -> Grid | None:
    """One regex scan per piece finds what could make the bound larger: a cell whose row or column
    is past the largest so far (which starts at the piece's last cell: rows usually grow), or a
    cell written otherwise (no `r` first, a reference Excel would not write: the exact walk)."""
    last_row, last_col = 0, 0  # 1-based
    for text in _tags(stream):
        if b":sheetData" in text:  # namespace prefixes on every tag
            return None
        end = text.rfind(_FIRST_REF)
        if end < 0:
            continue
        at = 0
        for _ in range(_RAISES):
            ref = _REF.match(text, end)
            if ref is None:
                return None
            col, row = ref.groups()
            last_row, last_col = max(last_row, int(row)), max(last_col, column_number(col))
            match = _suspect(last_row, last_col).search(text, at)
            if match is None:
                break
            end = at = match.start()
            at += 1
        else:
            return None  # cells far out of order: the exact walk is linear
    grid = Grid()
    if last_row:
        grid.add(0, 0)
        grid.add(last_row - 1, last_col - 1)
    return grid


_RAISES = 64
_LETTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@functools.lru_cache(maxsize=256)
def _suspect(row: int, col: int) -> re.Pattern[bytes]:
    """A cell tag that is not `<c r="…"` naming a column ≤ `col` and a row ≤ `row` as Excel
    writes them (checked in one lookahead per cell: ~2 ns per byte)."""
    return re.compile(rb'<c(?=[\s/>])(?! r="(?:' + _at_most(column_letters(col).encode(), _LETTERS)
                      + rb')(?:' + _at_most(str(row).encode(), b"0123456789") + rb')")')


def _at_most(value: bytes, alphabet: bytes) -> bytes:
    """A regex for strings over `alphabet` (digits: no leading zero) that compare at most `value`
    as numbers: shorter ones, or as long and smaller at the first place they differ, or equal."""
    every = b"[" + alphabet[:1] + b"-" + alphabet[-1:] + b"]"
    digits = alphabet[:1] == b"0"
    first = b"[" + alphabet[1:2] + b"-" + alphabet[-1:] + b"]" if digits else every
    options = [first + every + b"{0,%d}" % (len(value) - 2)] if len(value) > 1 else []
    for i, byte in enumerate(value):
        lower = alphabet[1 if digits and i == 0 else 0: alphabet.index(byte)]
        if lower:
            options.append(re.escape(value[:i]) + b"[" + lower[:1] + b"-" + lower[-1:] + b"]"
                           + every + b"{%d}" % (len(value) - i - 1))
    return b"|".join([*options, re.escape(value)])


def _tags(stream: io.BufferedIOBase) -> Iterator[bytes]:
    """The XML in pieces of about _CHUNK bytes, each cut before a '<' (no tag is split)."""
    rest = b""
    while chunk := stream.read(_CHUNK):
        text = rest + chunk
        cut = text.rfind(b"<")
        if cut <= 0:
            rest = text
            continue
        yield text[:cut]
        rest = text[cut:]
    if rest:
        yield rest


def _walk(stream: io.BufferedIOBase) -> Grid:
    """Every row and cell in order, placed as calamine places them: at their reference, else
    one past the previous row or cell; only cells with a value (<v>, <is> or <f>) count."""
    grid = Grid()
    row, col = -1, -1
    cell: tuple[int, int] | None = None  # an open <c> that has no value yet
    for text in _tags(stream):
        for closing, tag, attrs, empty in _TOKEN.findall(text):
            if closing:
                if tag == b"c":
                    cell = None
                continue
            if tag == b"row":
                ref = _R.search(attrs)
                row = int(ref.group(2)) - 1 if ref and ref.group(2) else row + 1
                col = -1
            elif tag == b"c":
                ref = _R.search(attrs)
                if ref and ref.group(1):
                    col = column_number(ref.group(1).upper()) - 1
                    if ref.group(2):
                        row = int(ref.group(2)) - 1
                else:
                    col += 1
                cell = None if empty else (max(row, 0), col)
            elif cell is not None:
                grid.add(*cell)
                cell = None
    return grid


def _sheet_parts(archive: zipfile.ZipFile) -> list[tuple[str, str]]:
    """(sheet name, part name) of every worksheet: the parts the workbook's relationships name (as
    calamine finds them), and any other XML part under xl/worksheets/."""
    names = set(archive.namelist())
    parts = {n: posixpath.basename(n) for n in names if n.startswith(STREAMED_SHEETS) and n.endswith(".xml")}
    try:
        workbook = archive.read("xl/workbook.xml")[: 4 << 20]
        rels = archive.read("xl/_rels/workbook.xml.rels")[: 4 << 20]
    except (KeyError, zipfile.BadZipFile, OSError, ValueError, NotImplementedError, RuntimeError):
        return sorted((title, part) for part, title in parts.items())
    targets = {}
    for tag in re.finditer(rb'<(?:\w+:)?Relationship\b[^>]*>', rels):
        attrs = dict(_ATTR.findall(tag.group(0)))
        target = attrs.get(b"Target", b"").decode("utf-8", "replace")
        target = target.lstrip("/") if target.startswith("/") else posixpath.normpath("xl/" + target)
        targets[attrs.get(b"Id", b"")] = target
    for tag in _SHEET.finditer(workbook):
        attrs = dict(_ATTR.findall(tag.group(0)))
        rel = next((v for k, v in attrs.items() if k.endswith(b":id")), b"")
        if targets.get(rel) in names:
            parts[targets[rel]] = attrs.get(b"name", b"").decode("utf-8", "replace")
    return sorted((title, part) for part, title in parts.items())


def cell_count(cells: int) -> str:
    if cells >= 1_000_000_000:
        return f"{cells / 1e9:,.1f} billion"
    if cells >= 1_000_000:
        return f"{cells / 1e6:.1f} million"
    return f"{cells:,}"


def grid_too_large(grid: Grid, name: str, label: str) -> LimitExceeded:
    first = f"{column_letters(grid.first_col + 1)}{grid.first_row + 1}"
    last = f"{column_letters(grid.last_col + 1)}{grid.last_row + 1}"
    return LimitExceeded(
        f"The sheet “{name}” of this {label} file spans {cell_count(grid.cells)} cells ({grid.columns:,} columns "
        f"× {grid.rows:,} rows, {first}:{last}), and the spreadsheet reader allocates every cell of that "
        f"range, empty or not; LucidRAG reads sheets of at most {limits.MAX_SHEET_CELLS:,} cells "
        "(MAX_SHEET_CELLS). Delete the stray cells far outside the table (Ctrl+End goes to the last "
        "one) or split the sheet, save it, then upload it again.")
