"""The grid calamine would allocate, measured from sheet XML written every way calamine accepts:
the regex scan (cells written as Excel writes them) and the exact walk (anything else) agree with
what calamine itself builds for the same sheet."""

from __future__ import annotations

import io
import zipfile

import pytest

from lucidrag.ingestion.parsing.sheetgrid import _fast_bound, _walk, column_letters, column_number, measure

SHEETS = {
    "excel": (b'<worksheet><cols><col min="1" max="2"/></cols><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c>'
              b'<c r="B1" s="2"/></row><row r="5"><c r="C5"><v>1</v></c><c r="ZZ9000" s="1"/></row></sheetData>'
              b'</worksheet>', (5, 3)),
    "out of order": (b'<worksheet><sheetData><row r="1"><c r="XFD1048576"><v>0</v></c><c r="B1"><v>1</v></c></row>'
                     b'</sheetData></worksheet>', (1048576, 16383)),
    "without references": (b'<worksheet><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c></row><row><c><v>1</v></c>'
                           b'<c><v>2</v></c></row><row r="100"><c/><c/><c><v>3</v></c></row></sheetData></worksheet>',
                           (100, 3)),
    "namespace prefix": (b'<x:worksheet><x:sheetData><x:row r="1"><x:c r="B2" t="inlineStr"><x:is><x:t>a</x:t></x:is>'
                         b'</x:c><x:c r="XFD1048576"><x:v>1</x:v></x:c></x:row></x:sheetData></x:worksheet>',
                         (1048575, 16383)),
    "leading zeros": (b'<worksheet><sheetData><row r="1"><c r="A1"><v>0</v></c><c r="ZZ000900000"><v>1</v></c></row>'
                      b'</sheetData></worksheet>', (900000, 702)),
    "reference not first": (b'<worksheet><sheetData><row r="1"><c r="A1"><v>0</v></c><c s="1" r="ZZ900000"><v>1</v>'
                            b'</c></row></sheetData></worksheet>', (900000, 702)),
    "lower case": (b'<worksheet><sheetData><row r="1"><c r="A1"><v>0</v></c><c r="zz900000"><v>1</v></c></row>'
                   b'</sheetData></worksheet>', (900000, 702)),
}


@pytest.mark.parametrize("xml,size", SHEETS.values(), ids=SHEETS.keys())
def test_the_grid_is_measured_as_calamine_allocates_it(xml: bytes, size: tuple[int, int]):
    grid = measure(io.BytesIO(xml))
    assert (grid.rows, grid.columns) == size
    fast = _fast_bound(io.BytesIO(xml))
    if fast is not None:  # an upper bound from A1, never below the exact grid
        assert fast.rows >= grid.rows and fast.columns >= grid.columns


def test_a_regular_sheet_is_bounded_by_the_scan_without_the_walk():
    rows = "".join(f'<row r="{r}">' + "".join(f'<c r="{c}{r}"><v>{r}</v></c>' for c in "ABCDE") + "</row>"
                   for r in range(1, 3001))
    xml = f"<worksheet><sheetData>{rows}</sheetData></worksheet>".encode()
    fast = _fast_bound(io.BytesIO(xml))
    assert fast is not None and (fast.rows, fast.columns) == (3000, 5) == (_walk(io.BytesIO(xml)).rows, 5)


def test_a_sheets_real_grid_matches_calamines():
    from python_calamine import CalamineWorkbook

    from tests import hostile_files as h

    data = h.xlsx_sparse("K40")
    sheet = CalamineWorkbook.from_filelike(io.BytesIO(data)).get_sheet_by_name("Prices")
    grid = measure(zipfile.ZipFile(io.BytesIO(data)).open("xl/worksheets/sheet1.xml"))
    assert (grid.rows, grid.columns) == (sheet.height, sheet.width) == (40, 11)


def test_column_letters_round_trip():
    assert [column_number(column_letters(n).encode()) for n in (1, 26, 27, 702, 703, 16384)] == [1, 26, 27, 702, 703, 16384]
    assert column_letters(16384) == "XFD"
