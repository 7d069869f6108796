"""The grid a spreadsheet reader would allocate for a binary workbook (.xls, .xlsb), counted from
its records before it reads them.

calamine reads an .xls (BIFF records in an OLE compound file) whole when it opens it: for each
sheet it reserves the cells the sheet's DIMENSIONS record declares (up to 2^32 rows × 65,536
columns, nothing checks them) and builds a dense grid from its first to its last cell with a
value, as for .xlsx; an .xlsb sheet's dense grid is built from its cell records' positions (a
column is 32 bits there). `check_binary_sheet_grids` walks those records as calamine does (the
sheets the workbook names, nested substreams skipped, the cell records it keeps) and fails a
sheet past limits.MAX_SHEET_CELLS, declared or spanned, before calamine sees the file.

    check_binary_sheet_grids(data, label)   by content, whatever the file is called: an OLE file
                                            (.xls) or a zip with xl/workbook.bin (.xlsb); anything
                                            else passes through (sheetgrid.py measures .xlsx/.ods)
    binary_sheet_grids(data, label)         each sheet's name, declared (rows, columns), grid

A compound file whose workbook stream cannot be followed (olecfb.py) passes through too: calamine
reports it damaged, or the parse worker's memory cap stops it.
"""

from __future__ import annotations

import io
import posixpath
import re
import struct
import zipfile
from collections.abc import Iterator
from typing import IO

from lucidrag.base import limits
from lucidrag.base.errors import LimitExceeded

from .archive import damaged_part
from .olecfb import MAGIC, compound_stream
from .sheetgrid import Grid, cell_count, grid_too_large
_CHUNK = 1 << 20

# ---------------------------------------------------------------------------------------------
# .xls: BIFF5 / BIFF8 records [MS-XLS]

_RECORD = struct.Struct("<HH")
_U16_PAIR = struct.Struct("<HH")
_BOF, _EOF, _FILEPASS, _BOUNDSHEET, _DIMENSIONS, _MULRK, _FORMULA = (
    0x0809, 0x000A, 0x002F, 0x0085, 0x0200, 0x00BD, 0x0006)
# Records calamine keeps a cell of, each starting with its row and column (u16 each)
_CELLS = frozenset({0x0203, 0x0204, 0x00D6, 0x0205, 0x027E, 0x00FD, _FORMULA})
_WORKBOOK_STREAMS = ("Workbook", "Book")  # calamine tries these (and their upper case) in turn


def check_binary_sheet_grids(data: bytes, label: str) -> None:
    for name, declared, grid in binary_sheet_grids(data, label):
        if declared is not None and declared[0] * declared[1] > limits.MAX_SHEET_CELLS:
            raise _declared_too_large(name, label, *declared)
        if grid.cells > limits.MAX_SHEET_CELLS:
            raise grid_too_large(grid, name, label)


def binary_sheet_grids(data: bytes, label: str) -> Iterator[tuple[str, tuple[int, int] | None, Grid]]:
    """Each sheet's name, the (rows, columns) calamine reserves for it before reading it (.xls:
    its largest DIMENSIONS record; None: nothing reserved) and the grid of its cells."""
    if data.startswith(MAGIC):
        stream = compound_stream(data, _WORKBOOK_STREAMS)
        walked: dict[int, tuple[tuple[int, int] | None, Grid]] = {}  # sheets named at one position
        for name, position in _xls_sheets(stream) if stream is not None else ():
            if position not in walked:
                walked[position] = _xls_sheet(stream, position)
            yield name, *walked[position]
    elif data.startswith(b"PK"):
        yield from _xlsb_grids(data, label)


def _records(stream: bytes, position: int) -> Iterator[tuple[int, int, int]]:
    """(type, start, end) of each record from `position` (a record cut short ends the walk)."""
    size = len(stream)
    while position + 4 <= size:
        kind, length = _RECORD.unpack_from(stream, position)
        start = position + 4
        position = start + length
        if position > size:
            return
        yield kind, start, position


def _xls_sheets(stream: bytes) -> list[tuple[str, int]]:
    """(name, stream position) of each sheet the workbook globals name; none when the workbook is
    encrypted (the cell records are then ciphertext; calamine refuses it as password-protected)."""
    sheets: list[tuple[str, int]] = []
    biff8 = True
    for kind, start, end in _records(stream, 0):
        if kind == _BOF and end - start >= 2:
            biff8 = _U16_PAIR.unpack_from(stream, start)[0] == 0x0600
        elif kind == _FILEPASS and end - start >= 2 and _U16_PAIR.unpack_from(stream, start)[0]:
            return []
        elif kind == _BOUNDSHEET and end - start >= 8:
            position = int.from_bytes(stream[start : start + 4], "little")
            sheets.append((_sheet_name(stream[start + 6 : end], biff8) or f"Sheet {len(sheets) + 1}", position))
        elif kind == _EOF:
            break
    return sheets


def _sheet_name(record: bytes, biff8: bool) -> str:
    length = record[0]
    if not biff8:
        return record[1 : 1 + length].decode("cp1252", "replace")
    wide = len(record) > 1 and record[1] & 1
    text = record[2 : 2 + length * (2 if wide else 1)]
    return text.decode("utf-16-le" if wide else "latin-1", "replace")


def _xls_sheet(stream: bytes, position: int) -> tuple[tuple[int, int] | None, Grid]:
    """The (rows, columns) calamine reserves for the sheet at `position` (its largest DIMENSIONS
    record, None without one) and the grid of its cells (values and formulas)."""
    grid = Grid()
    declared: tuple[int, int] | None = None
    sheet_bof, depth = False, 0
    for kind, start, end in _records(stream, position):
        if depth:  # a nested substream (an embedded chart): calamine skips its records
            depth += kind == _BOF
            depth -= kind == _EOF
            continue
        if kind == _BOF:
            depth, sheet_bof = (1, True) if sheet_bof else (0, True)
        elif kind == _EOF:
            break
        elif kind == _DIMENSIONS:
            reserved = _reserved(stream[start:end])
            if reserved is not None and (declared is None or reserved[0] * reserved[1] > declared[0] * declared[1]):
                declared = reserved
        elif end - start >= 4 and (kind in _CELLS or kind == _MULRK):
            row, column = _U16_PAIR.unpack_from(stream, start)
            grid.add(row, column)
            if kind == _MULRK and end - start >= 6:
                grid.add(row, int.from_bytes(stream[end - 2 : end], "little"))
    return declared, grid


def _reserved(record: bytes) -> tuple[int, int] | None:
    """Rows and columns calamine reserves for a DIMENSIONS record (u32 arithmetic, wrapping)."""
    if len(record) == 14:
        first_row, last_row, first_col, last_col = struct.unpack_from("<IIHH", record)
    elif len(record) == 10:
        first_row, last_row, first_col, last_col = struct.unpack_from("<HHHH", record)
    else:
        return None  # calamine fails the file as damaged
    if first_col > 0xFF or last_col < first_col:
        first_col = 0
    if last_row < 1 or last_col < 1:
        return 1, 1
    return (last_row - 1 - first_row + 1) & 0xFFFFFFFF, (last_col - 1 - first_col + 1) & 0xFFFFFFFF


def _declared_too_large(name: str, label: str, rows: int, columns: int) -> LimitExceeded:
    return LimitExceeded(
        f"The sheet “{name}” of this {label} file declares {cell_count(rows * columns)} cells ({columns:,} "
        f"columns × {rows:,} rows), and the spreadsheet reader sets memory aside for every cell a sheet "
        f"declares before reading it; LucidRAG reads sheets of at most {limits.MAX_SHEET_CELLS:,} cells "
        "(MAX_SHEET_CELLS). Open the file in Excel/WPS/LibreOffice and save it again (as .xlsx), or split "
        "the sheet, then upload it again.")


# ---------------------------------------------------------------------------------------------
# .xlsb: BIFF12 records [MS-XLSB]: a 1-2 byte type and a 1-4 byte size, 7 bits a byte

_ROW_HEADER, _BEGIN_DATA, _END_DATA, _WS_DIM = 0x0000, 0x0091, 0x0092, 0x0094
_XLSB_CELLS = frozenset(range(0x0002, 0x000B))  # Rk, Error, Bool, Real, St, Isst, FmlaString/Num/Bool
_LAST_ROW = 0x0010_0000  # calamine ends a sheet at a row header past it
# Blocks calamine skips (start → end record) while it looks for the sheet's data
_SKIPPED_BLOCKS = {0x0085: 0x0086, 0x0025: 0x0026, 0x0186: 0x0187}
_BUNDLE_SHEET, _END_BUNDLE_SHEETS = 0x009C, 0x0090
_WORKBOOK = "xl/workbook.bin"
_WORKBOOK_RELS = "xl/_rels/workbook.bin.rels"
_ATTR = re.compile(rb'([\w:]+)="([^"]*)"')


def _xlsb_grids(data: bytes, label: str) -> Iterator[tuple[str, None, Grid]]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError):
        return
    with archive:
        names = set(archive.namelist())
        if _WORKBOOK not in names:
            return
        for name, part in _xlsb_sheet_parts(archive, names):
            try:
                with archive.open(part) as stream:
                    grid = xlsb_grid(stream)
            except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
                raise damaged_part(label, part, exc) from None
            yield name, None, grid  # calamine reserves an .xlsb sheet's declared cells only below 100,000


def _xlsb_sheet_parts(archive: zipfile.ZipFile, names: set[str]) -> list[tuple[str, str]]:
    """(sheet name, part) of every sheet the workbook names (as calamine finds them) and of any
    other .bin part under xl/worksheets/."""
    parts = {n: posixpath.basename(n) for n in names if n.startswith("xl/worksheets/") and n.endswith(".bin")}
    try:
        rels = archive.read(_WORKBOOK_RELS)[: 4 << 20] if _WORKBOOK_RELS in names else b""
        with archive.open(_WORKBOOK) as workbook:
            bundles = _bundled_sheets(workbook.read(4 << 20))
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError, IndexError):
        return sorted((title, part) for part, title in parts.items())
    targets = {}
    for tag in re.finditer(rb"<(?:\w+:)?Relationship\b[^>]*>", rels):
        attrs = dict(_ATTR.findall(tag.group(0)))
        targets[attrs.get(b"Id", b"").decode("utf-8", "replace")] = attrs.get(b"Target", b"").decode("utf-8", "replace")
    for relation, title in bundles:
        part = "xl/" + targets.get(relation, "")
        if part in names:
            parts[part] = title
    return sorted((title, part) for part, title in parts.items())


def _bundled_sheets(workbook: bytes) -> list[tuple[str, str]]:
    """(relationship id, name) of each BrtBundleSh record of xl/workbook.bin."""
    sheets: list[tuple[str, str]] = []
    for kind, record in _xlsb_records(workbook):
        if kind == _END_BUNDLE_SHEETS:
            break
        if kind == _BUNDLE_SHEET and len(record) >= 12:
            length = int.from_bytes(record[8:12], "little")
            if length == 0xFFFF_FFFF:
                continue
            relation = record[12 : 12 + 2 * length].decode("utf-16-le", "replace")
            rest = record[12 + 2 * length :]
            title = rest[4 : 4 + 2 * int.from_bytes(rest[:4], "little")].decode("utf-16-le", "replace")
            sheets.append((relation, title))
    return sheets


def _xlsb_records(data: bytes) -> Iterator[tuple[int, bytes]]:
    at, size = 0, len(data)
    while at < size:
        kind, length, at = _xlsb_header(data, at)
        if at + length > size:
            return
        yield kind, data[at : at + length]
        at += length


def _xlsb_header(data: bytes, at: int) -> tuple[int, int, int]:
    """(type, length, position of the record's data) of the record header at `at`."""
    byte = data[at]
    at += 1
    kind = byte & 0x7F
    if byte & 0x80:
        kind |= (data[at] & 0x7F) << 7
        at += 1
    byte = data[at]
    at += 1
    length, shift = byte & 0x7F, 7
    while byte & 0x80 and shift < 28:
        byte = data[at]
        at += 1
        length |= (byte & 0x7F) << shift
        shift += 7
    return kind, length, at


def xlsb_grid(stream: IO[bytes]) -> Grid:
    """The grid calamine builds for one sheet's records, read in chunks of _CHUNK bytes: the cell
    records (value cells, not blanks) between BrtBeginSheetData and BrtEndSheetData, after the
    sheet's BrtWsDim, each at the row of the BrtRowHdr before it and the column it names. Like
    calamine, a position is read from the first 4 bytes of one reused buffer, which a shorter
    record leaves as the record before wrote them (`last`, `last_at`: where those 4 bytes are)."""
    grid = Grid()
    last, last_at = bytes(4), 0
    buffer, at = b"", 0
    phase, skipping, row = _WS_DIM, -1, 0
    cells, end_data, row_header = _XLSB_CELLS, _END_DATA, _ROW_HEADER
    while True:
        if len(buffer) - at < 16:
            buffer, at = buffer[at:] + stream.read(_CHUNK), 0
            if not buffer:
                return grid
        kind, length = buffer[at], buffer[at + 1] if len(buffer) > at + 1 else 0x80
        if kind < 0x80 and length < 0x80:  # most records: a 1-byte type and a 1-byte size
            at += 2
        else:
            try:
                kind, length, at = _xlsb_header(buffer, at)
            except IndexError:
                return grid  # cut short: calamine fails the file as damaged
        if length >= 4:
            last, last_at = buffer, at
        else:
            kept = bytearray(last[last_at : last_at + 4])
            kept[:length] = buffer[at : at + length]
            last, last_at = bytes(kept), 0
        at += length
        if at > len(buffer):  # a long record: skip the rest of it unread
            last, last_at = buffer[at - length : at - length + 4], 0
            _skip(stream, at - len(buffer))
            buffer, at = b"", 0
        if phase == end_data:
            if kind in cells:
                grid.add(row, int.from_bytes(last[last_at : last_at + 4], "little"))
            elif kind == row_header:
                row = int.from_bytes(last[last_at : last_at + 4], "little")
                if row > _LAST_ROW:
                    return grid
            elif kind == end_data:
                return grid
        elif phase == _WS_DIM:
            phase = _BEGIN_DATA if kind == _WS_DIM else phase
        elif skipping >= 0:
            skipping = -1 if kind == skipping else skipping
        elif kind == _BEGIN_DATA:
            phase = end_data
        else:
            skipping = _SKIPPED_BLOCKS.get(kind, -1)


def _skip(stream: IO[bytes], count: int) -> None:
    while count > 0:
        read = len(stream.read(min(count, _CHUNK)))
        if not read:
            raise EOFError("record past the end of the part")
        count -= read

