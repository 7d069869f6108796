"""Binary workbooks (.xls, .xlsb): the grid calamine would allocate is measured from their records
before calamine reads them. Workbooks built record by record (tests/binary_workbooks.py) that
calamine reads as written; the real ingest, in its worker, for the ones that would abort it."""

from __future__ import annotations

import io
import struct
import zipfile

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from lucidrag.base import limits
from lucidrag.base.errors import LimitExceeded, ParseError
from lucidrag.ingestion.parsing import parse_file
from lucidrag.ingestion.parsing.binsheetgrid import binary_sheet_grids, xlsb_grid
from lucidrag.ingestion.parsing.olecfb import compound_stream
from tests.binary_workbooks import Sheet, _biff, _bof, _record, compound_file, xls_workbook, xlsb_sheet, xlsb_workbook
from tests.conftest import Harness

KB = "kb-binary-sheets"
PRICES = {(0, 0): "Part", (0, 1): "Price", (1, 0): "PX-1042", (1, 1): 12.5, (2, 0): "PX-1007", (2, 1): 7.0}
SPARSE = {(2, 1): "Part", (9, 5): 3.0, (4, 3): "note"}


def workbook(fmt: str, cells: dict, dimensions: tuple[int, int, int, int] | None = None) -> bytes:
    return xls_workbook({"Prices": Sheet(cells, dimensions)}) if fmt == "xls" else xlsb_workbook({"Prices": cells})


@pytest.mark.parametrize("fmt", ["xls", "xlsb"])
def test_a_workbook_within_the_limit_is_read_as_before(fmt: str):
    document = parse_file(workbook(fmt, PRICES), f"prices.{fmt}")
    assert document.text == "| Part | Price |\n| --- | --- |\n| PX-1042 | 12.5 |\n| PX-1007 | 7 |"


@pytest.mark.parametrize("fmt", ["xls", "xlsb"])
def test_the_grid_is_measured_as_calamine_builds_it(fmt: str):
    from python_calamine import CalamineWorkbook

    data = workbook(fmt, SPARSE)
    [(name, declared, grid)] = binary_sheet_grids(data, f".{fmt}")
    sheet = CalamineWorkbook.from_filelike(io.BytesIO(data)).get_sheet_by_name("Prices")
    assert name == "Prices"
    assert ((grid.first_row, grid.first_col), (grid.last_row, grid.last_col)) == (sheet.start, sheet.end) == ((2, 1), (9, 5))
    assert declared == ((8, 5) if fmt == "xls" else None)  # DIMENSIONS as Excel writes it: the used range


def test_an_xlsb_cell_record_shorter_than_its_column_is_placed_where_calamine_places_it():
    # calamine reads every record into one buffer it never shrinks: a cell record too short to
    # hold its column takes the column the record before left there (here 300).
    part = xlsb_sheet({(0, 0): "Part"}).replace(
        _record(0x0092), _record(0x0400, struct.pack("<I", 300) + bytes(12)) + _record(0x0004) + _record(0x0092))
    data = xlsb_workbook({"Prices": {(0, 0): "Part"}})
    data = _replace_part(data, "xl/worksheets/sheet1.bin", part)
    from python_calamine import CalamineWorkbook

    sheet = CalamineWorkbook.from_filelike(io.BytesIO(data)).get_sheet_by_name("Prices")
    grid = xlsb_grid(io.BytesIO(part))
    assert (grid.last_row, grid.last_col) == sheet.end == (0, 300)


@pytest.mark.parametrize("fmt", ["xls", "xlsb"])
def test_a_sheet_of_as_many_cells_as_the_limit_is_read_and_one_more_fails(fmt: str, monkeypatch):
    lying = workbook(fmt, SPARSE, (2, 3, 1, 2))  # an .xls declaring one cell: its cells are counted
    monkeypatch.setattr(limits, "MAX_SHEET_CELLS", 8 * 5 - 1)  # SPARSE spans 8 rows × 5 columns
    with pytest.raises(LimitExceeded, match=r"spans 40 cells \(5 columns × 8 rows, B3:F10\)"):
        parse_file(lying, f"sparse.{fmt}")
    monkeypatch.setattr(limits, "MAX_SHEET_CELLS", 8 * 5)
    assert "note" in parse_file(lying, f"sparse.{fmt}").text


def test_an_xls_sheet_declaring_more_cells_than_the_limit_fails_before_it_is_read(monkeypatch):
    monkeypatch.setattr(limits, "MAX_SHEET_CELLS", 100)
    parse_file(workbook("xls", PRICES, (0, 10, 0, 10)), "prices.xls")  # declares 10 × 10
    with pytest.raises(LimitExceeded, match=r"declares 101 cells \(1 columns × 101 rows\)"):
        parse_file(workbook("xls", PRICES, (0, 101, 0, 1)), "prices.xls")


def test_an_encrypted_xls_is_left_to_the_reader_to_refuse():
    # After FILEPASS the records are ciphertext: a "cell" there is at no real position
    sheet = _bof(0x0010) + _biff(0x0203, struct.pack("<HHHd", 65535, 65535, 0, 1.0)) + _biff(0x000A, b"")
    head = _bof(0x0005) + _biff(0x002F, struct.pack("<HHH", 1, 1, 1) + bytes(48))
    bound = _biff(0x0085, struct.pack("<IBBBB", 0, 0, 0, 1, 0) + b"S")
    stream = head + _biff(0x0085, struct.pack("<IBBBB", len(head) + len(bound) + 4, 0, 0, 1, 0) + b"S")
    data = compound_file("Workbook", stream + _biff(0x000A, b"") + sheet)
    assert list(binary_sheet_grids(data, ".xls")) == []
    with pytest.raises(ParseError) as raised:
        parse_file(data, "locked.xls")
    assert not isinstance(raised.value, LimitExceeded)


# Each of these aborts (or panics) the spreadsheet reader on the code before the measurement.
HOSTILE = {
    "xls declaring 2^32 rows": ("prices.xls", lambda: workbook("xls", PRICES, (0, 0xFFFFFFFF, 0, 256)),
                                "declares 1,099.5 billion cells (256 columns × 4,294,967,295 rows)"),
    "xls with a cell at column 65,536": ("prices.xls", lambda: workbook("xls", {**PRICES, (65535, 65535): 1.0}, (0, 3, 0, 2)),
                                         "spans 4.3 billion cells (65,536 columns × 65,536 rows, A1:CRXP65536)"),
    "xlsb with a cell at XFD1048576": ("prices.xlsb", lambda: workbook("xlsb", {**PRICES, (1048575, 16383): 1.0}),
                                       "spans 17.2 billion cells (16,384 columns × 1,048,576 rows, A1:XFD1048576)"),
}


@pytest.mark.parametrize("name,build,says", HOSTILE.values(), ids=HOSTILE.keys())
async def test_a_binary_sheet_past_the_limit_fails_with_its_range_and_the_next_file_is_read(
        harness: Harness, host, name: str, build, says: str):
    await harness.create(KB)
    result = await harness.ingest(KB, name, build())
    assert result.status == DocumentStatus.FAILED
    assert f"The sheet “Prices” of this .{name.split('.')[1]} file {says}" in result.error_message
    assert "(MAX_SHEET_CELLS)" in result.error_message and "upload it again" in result.error_message
    assert host.embedded_texts == 0 and host.vector_count(KB) == 0
    assert (await harness.ingest(KB, "ok.xls", workbook("xls", PRICES))).status == DocumentStatus.COMPLETED


def _replace_part(data: bytes, part: str, content: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            target.writestr(info.filename, content if info.filename == part else source.read(info.filename))
    return out.getvalue()


@pytest.mark.parametrize("shift", [9, 12], ids=["512-byte sectors", "4096-byte sectors"])
@pytest.mark.parametrize("size", [179, 5_000, 300_000], ids=["in the mini stream", "small", "large"])
def test_a_compound_files_stream_is_read_whole(shift: int, size: int):
    stream = bytes(range(256)) * (size // 256) + bytes(size % 256)
    assert compound_stream(compound_file("Workbook", stream, shift=shift), ("book", "WORKBOOK")) == stream


def test_a_looping_chain_costs_no_more_than_reading_the_file():
    data = bytearray(compound_file("Workbook", b"\x09\x08" + bytes(5_000)))
    first_data, entry = 2, 2 * 512 + 128  # the stream's first sector; its directory entry
    struct.pack_into("<I", data, 512 + 4 * first_data, first_data)  # its chain loops on itself
    struct.pack_into("<I", data, entry + 120, 0xFFFFFF00)  # and it declares 4 GB
    assert compound_stream(bytes(data), ("Workbook",)) is None
    struct.pack_into("<I", data, entry + 120, 5_002)
    assert len(compound_stream(bytes(data), ("Workbook",))) == 5_002 < len(data)
