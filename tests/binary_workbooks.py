"""Binary workbooks built at test time, record by record: .xls (BIFF8 records in an OLE compound
file, [MS-XLS] and [MS-CFB]) and .xlsb (BIFF12 records in a zip, [MS-XLSB]). No writer of either
format is installed (xlwt is unmaintained, nothing writes .xlsb in Python), so these write the
records a workbook needs and calamine reads: a sheet's cells, and for .xls the DIMENSIONS record a
writer declares the sheet's range in.

    xls_workbook({"Prices": Sheet(cells, dimensions)})   -> .xls bytes
    xlsb_workbook({"Prices": cells})                      -> .xlsb bytes

`cells` maps (row, column), 0-based, to a str or a float.
"""

from __future__ import annotations

import io
import struct
import zipfile
from dataclasses import dataclass

Cells = dict[tuple[int, int], "str | float"]


@dataclass(frozen=True)
class Sheet:
    cells: Cells
    # (first row, last row + 1, first column, last column + 1) as DIMENSIONS declares them; None:
    # the range of the cells, as Excel writes it
    dimensions: tuple[int, int, int, int] | None = None


# ---------------------------------------------------------------------------------------------
# .xls


def _biff(kind: int, payload: bytes) -> bytes:
    return struct.pack("<HH", kind, len(payload)) + payload


def _bof(substream: int) -> bytes:  # BIFF8, 0x0005 workbook globals, 0x0010 worksheet
    return _biff(0x0809, struct.pack("<HHHHII", 0x0600, substream, 0x0DBB, 0x07CC, 0, 0x06))


def _xls_cell(row: int, column: int, value: str | float) -> bytes:
    if isinstance(value, str):  # LABEL: an XLUnicodeString, UTF-16
        return _biff(0x0204, struct.pack("<HHHHB", row, column, 0, len(value), 1) + value.encode("utf-16-le"))
    return _biff(0x0203, struct.pack("<HHHd", row, column, 0, value))  # NUMBER


def _xls_sheet(sheet: Sheet) -> bytes:
    rows = [row for row, _ in sheet.cells] or [0]
    columns = [column for _, column in sheet.cells] or [0]
    first_row, last_row, first_col, last_col = sheet.dimensions or (
        min(rows), max(rows) + 1, min(columns), max(columns) + 1)
    body = [_bof(0x0010), _biff(0x0200, struct.pack("<IIHHH", first_row, last_row, first_col, last_col, 0))]
    body += [_xls_cell(row, column, value) for (row, column), value in sorted(sheet.cells.items())]
    return b"".join(body) + _biff(0x000A, b"")


def xls_workbook(sheets: dict[str, Sheet]) -> bytes:
    """An .xls (BIFF8) of these sheets, in an OLE compound file with one "Workbook" stream."""
    def bound_sheet(position: int, name: str) -> bytes:
        return _biff(0x0085, struct.pack("<IBBBB", position, 0, 0, len(name), 1) + name.encode("utf-16-le"))

    bodies = [_xls_sheet(sheet) for sheet in sheets.values()]
    globals_size = len(_bof(0x0005)) + sum(len(bound_sheet(0, name)) for name in sheets) + 4
    positions, position = [], globals_size
    for body in bodies:
        positions.append(position)
        position += len(body)
    stream = (_bof(0x0005) + b"".join(bound_sheet(p, name) for p, name in zip(positions, sheets))
              + _biff(0x000A, b"") + b"".join(bodies))
    return compound_file("Workbook", stream)


_FREE, _END, _FAT, _NONE = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFF


def compound_file(name: str, stream: bytes, *, shift: int = 9) -> bytes:
    """An OLE compound file holding one stream: version 3 (512-byte sectors, `shift` 9) or 4
    (4,096, `shift` 12). A stream under 4,096 bytes goes in the mini stream, as writers put it."""
    size = 1 << shift
    per_sector = size // 4
    mini = len(stream) < 4096
    body = stream.ljust(-(-len(stream) // 64) * 64, b"\0") if mini else stream
    body_sectors = -(-len(body) // size)
    fat_sectors = 1
    while fat_sectors * per_sector < fat_sectors + 1 + mini + body_sectors:
        fat_sectors += 1
    assert fat_sectors <= 109, "the header's DIFAT holds 109 FAT sectors"
    directory = fat_sectors
    minifat = directory + 1 if mini else _END
    first_body = directory + 1 + mini
    fat = [_FAT] * fat_sectors + [_END] + ([_END] if mini else [])
    fat += [first_body + i + 1 for i in range(body_sectors - 1)] + [_END]
    fat += [_FREE] * (fat_sectors * per_sector - len(fat))
    header = struct.pack("<8s16sHHHHH6sIIIIIIIII", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", bytes(16), 0x003E,
                         3 if shift == 9 else 4, 0xFFFE, shift, 6, bytes(6), 0 if shift == 9 else 1, fat_sectors,
                         directory, 0, 4096, minifat, 1 if mini else 0, _END, 0)
    header += struct.pack("<109I", *(list(range(fat_sectors)) + [_FREE] * (109 - fat_sectors)))
    if mini:  # the root entry holds the mini stream; the stream is mini sectors 0, 1, … of it
        entries = (_entry("Root Entry", 5, child=1, start=first_body, size=len(body))
                   + _entry(name, 2, child=_NONE, start=0, size=len(stream)))
        chain = [i + 1 for i in range(len(body) // 64 - 1)] + [_END]
        minifat_sector = [struct.pack(f"<{per_sector}I", *(chain + [_FREE] * (per_sector - len(chain))))]
    else:
        entries = (_entry("Root Entry", 5, child=1, start=_END, size=0)
                   + _entry(name, 2, child=_NONE, start=first_body, size=len(stream)))
        minifat_sector = []
    entries += _entry("", 0, child=_NONE, start=0, size=0) * ((size - 256) // 128)  # the sector's other entries
    return (header.ljust(size, b"\0") + struct.pack(f"<{len(fat)}I", *fat) + entries + b"".join(minifat_sector)
            + body.ljust(body_sectors * size, b"\0"))


def _entry(name: str, kind: int, *, child: int, start: int, size: int) -> bytes:
    encoded = (name + "\0").encode("utf-16-le") if name else b""
    return struct.pack("<64sHBBIII16sIQQIII", encoded, len(encoded), kind, 1 if kind else 0, _NONE, _NONE,
                       child, bytes(16), 0, 0, 0, start, size, 0)


# ---------------------------------------------------------------------------------------------
# .xlsb


def _record(kind: int, payload: bytes = b"") -> bytes:
    head = bytes([kind]) if kind < 0x80 else bytes([(kind & 0x7F) | 0x80, kind >> 7])
    length, size = len(payload), bytearray()
    while True:
        size.append((length & 0x7F) | (0x80 if length > 0x7F else 0))
        length >>= 7
        if not length:
            break
    return head + bytes(size) + payload


def _wide(text: str) -> bytes:
    return struct.pack("<I", len(text)) + text.encode("utf-16-le")


def xlsb_sheet(cells: Cells) -> bytes:
    """A worksheet part: its declared range, then row headers and cells in row order."""
    rows = [row for row, _ in cells] or [0]
    columns = [column for _, column in cells] or [0]
    out = [_record(0x0081), _record(0x0094, struct.pack("<IIII", min(rows), max(rows), min(columns), max(columns))),
           _record(0x0091)]
    row = None
    for (r, column), value in sorted(cells.items()):
        if r != row:
            out.append(_record(0x0000, struct.pack("<IIHBBBI", r, 0, 300, 0, 0, 0, 0)))  # BrtRowHdr
            row = r
        if isinstance(value, str):
            out.append(_record(0x0006, struct.pack("<II", column, 0) + _wide(value)))  # BrtCellSt
        else:
            out.append(_record(0x0005, struct.pack("<IId", column, 0, value)))  # BrtCellReal
    out += [_record(0x0092), _record(0x0082)]
    return b"".join(out)


def xlsb_workbook(sheets: dict[str, Cells]) -> bytes:
    workbook = [_record(0x0083), _record(0x008F)]
    rels = []
    for n, name in enumerate(sheets, start=1):
        workbook.append(_record(0x009C, struct.pack("<II", 0, n) + _wide(f"rId{n}") + _wide(name)))
        rels.append(f'<Relationship Id="rId{n}" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
                    f'relationships/worksheet" Target="worksheets/sheet{n}.bin"/>')
    workbook += [_record(0x0090), _record(0x0084)]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", (
            '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
            'content-types"><Default Extension="bin" ContentType="application/vnd.ms-excel.sheet.binary.'
            'macroEnabled.main"/><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
            'relationships+xml"/></Types>'))
        archive.writestr("xl/workbook.bin", b"".join(workbook))
        archive.writestr("xl/_rels/workbook.bin.rels", (
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/'
            'package/2006/relationships">' + "".join(rels) + "</Relationships>"))
        for n, cells in enumerate(sheets.values(), start=1):
            archive.writestr(f"xl/worksheets/sheet{n}.bin", xlsb_sheet(cells))
    return buffer.getvalue()
