"""What a spreadsheet's passages say where they come from: the sheet, never a page (a sheet is not
one), nothing more for a single sheet; and a file that nothing in it names (a CSV, a sheet called
"Sheet1", an FAQ whose first heading is a question) is named like any untitled file, by its
format and upload time, so two of them can be told apart. Real files (openpyxl, csv) through the
real component, the bot's view (content, metadata) and the console's."""

from __future__ import annotations

import io
import re

import openpyxl
import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from components.pages.console.console import LucidRagConsole
from tests.conftest import Harness
from tests.test_console import ConsoleHost, api, create_kb, rows
from tests.test_faq_sheets import en_pairs, faq_csv, faq_xlsx

KB = "kb-sheets"
UNTITLED = r"{} file, \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
QUESTION, _, ANSWER = en_pairs()[0]


@pytest.fixture
def host() -> ConsoleHost:
    return ConsoleHost()


@pytest.fixture
def page(host: ConsoleHost) -> LucidRagConsole:
    component = LucidRagConsole()
    component.plugin = host  # type: ignore[assignment]
    return component


def workbook(sheets: dict[str, list[list[str]]]) -> bytes:
    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, sheet_rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in sheet_rows:
            sheet.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


HELP_DESK = {
    "Returns": [["Question", "Answer"], [QUESTION, ANSWER], ["How do I return a parcel?", "Use the label in the box."]],
    "Opening hours": [["Day", "Desk", "Hours"], ["Monday", "Front desk", "8-18"], ["Saturday", "Front desk", "9-12"]],
}


async def ingest(harness: Harness, name: str, data: bytes) -> str:
    result = await harness.ingest(KB, name, data)
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    return result.document_id


async def test_a_workbooks_passages_name_their_sheet_and_no_page(harness: Harness, host, page):
    await create_kb(harness, host, KB)
    file_id = await ingest(harness, "help.xlsx", workbook(HELP_DESK))
    response = await harness.retrieve(KB, "When is the front desk open on Saturday, and how do I reset my password?",
                                      settings={"top_k": 5})
    told = {entry.metadata["heading"]: entry for entry in response.results}
    faq, table = told[f"Returns › {QUESTION}"], told["Opening hours"]
    assert faq.content[0].text == f"Source: Returns › {QUESTION}\n\n{ANSWER}"  # was "Source: Returns · p. 1\n…"
    assert table.content[0].text.startswith("Source: Returns › Opening hours\n\n| Day | Desk | Hours |")
    for entry in response.results:
        assert entry.metadata["page"] == 0 and "p. " not in entry.metadata["citation"], entry.metadata
        assert entry.metadata["document_name"] == "Returns"
    assert rows(await api(page, "/kb", kb_id=KB))[file_id]["pages"] == ""  # was "1-2"
    preview = await api(page, "/chunks", kb_id=KB, file_id=file_id)
    assert {c["heading"] for c in preview["chunks"]} >= {f"Returns › {QUESTION}", "Opening hours"}
    assert all(not c["page"] for c in preview["chunks"]), preview["chunks"]
    hits = (await api(page, "/search", kb_id=KB, query="Saturday front desk hours"))["hits"]
    assert hits and all("p. " not in hit["citation"] for hit in hits), hits


async def test_a_single_sheet_adds_only_a_name_of_its_own(harness: Harness, host, page):
    await create_kb(harness, host, KB)
    named = await ingest(harness, "hours.xlsx", workbook({"Opening hours": HELP_DESK["Opening hours"]}))
    untitled = await ingest(harness, "rota.xlsx", workbook({"Sheet1": HELP_DESK["Opening hours"]}))
    response = await harness.retrieve(KB, "front desk hours on Saturday", settings={"top_k": 2})
    by_file = {entry.metadata["file_id"]: entry for entry in response.results}
    assert by_file[named].content[0].text.startswith("Source: Opening hours\n\n| Day |")
    name = by_file[untitled].metadata["document_name"]
    assert re.fullmatch(UNTITLED.format("XLSX"), name), name  # was "Sheet1", with "p. 1"
    assert by_file[untitled].content[0].text.startswith(f"Source: {name}\n\n| Day |")  # no "Sheet1"


async def test_an_untitled_faq_sheet_is_named_as_untitled_files_are_not_faq(harness: Harness, host, page):
    await create_kb(harness, host, KB)
    header = ["Question", "Similar question", "Answer", "Category"]
    files = {"CSV": await ingest(harness, "faq.csv", faq_csv(["Answer", "Question"], en_pairs())),
             "XLSX": await ingest(harness, "faq.xlsx", faq_xlsx(header, en_pairs(), sheet="Sheet1"))}
    titles = {fid: row["title"] for fid, row in rows(await api(page, "/kb", kb_id=KB)).items()}
    response = await harness.retrieve(KB, QUESTION, settings={"top_k": 2})
    assert {entry.metadata["file_id"] for entry in response.results} == set(files.values())
    for entry in response.results:
        fmt = next(f for f, fid in files.items() if fid == entry.metadata["file_id"])
        name = entry.metadata["document_name"]
        assert re.fullmatch(UNTITLED.format(fmt), name), name  # was "FAQ" for both
        assert titles[entry.metadata["file_id"]] == name
        assert entry.content[0].text.startswith(f"Source: {name} › {QUESTION}\n\n") and ANSWER in entry.content[0].text
