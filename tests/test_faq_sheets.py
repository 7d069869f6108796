"""FAQ sheets: a CSV / XLSX / ODS table whose header names a question and an answer column is
ingested one question–answer pair per chunk, so a user's question is matched against the FAQ's
question and the result carries its answer. Real files made here (openpyxl, csv, an ODS zip),
ingested and queried through the real component on the fake host."""

from __future__ import annotations

import csv
import io
import zipfile
from xml.sax.saxutils import escape

import openpyxl
import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from lucidrag.base.settings import CreationSettings
from lucidrag.ingestion.chunking import chunk_document
from lucidrag.ingestion.parsing import parse_bytes
from tests.conftest import Harness

KB = "kb-faq"
TOPICS = [("reset", "password"), ("change", "shipping address"), ("cancel", "subscription"), ("download", "invoice"),
          ("track", "parcel"), ("return", "damaged blender"), ("update", "credit card"), ("delete", "account"),
          ("redeem", "gift voucher"), ("extend", "warranty"), ("pause", "newsletter"), ("export", "order history"),
          ("enable", "two-factor login"), ("merge", "duplicate profiles"), ("book", "repair technician"),
          ("transfer", "loyalty points"), ("unlock", "frozen wallet"), ("renew", "parking permit"),
          ("register", "espresso machine"), ("replace", "lost keycard"), ("schedule", "furniture delivery"),
          ("verify", "student discount"), ("rename", "team workspace"), ("recover", "archived chats")]
ZH_TOPICS = [("修改", "收货地址"), ("取消", "会员订阅"), ("申请", "电子发票"), ("查询", "物流进度"), ("退换", "破损商品"),
             ("注销", "用户账号"), ("兑换", "积分礼品"), ("延长", "保修期限"), ("绑定", "银行卡片"), ("预约", "上门维修"),
             ("找回", "登录密码"), ("开通", "分期付款")]


def en_pairs() -> list[tuple[str, str, str]]:
    """(question, alternative question, answer); each answer is long enough that a few rows fill a chunk."""
    return [(f"How do I {verb} my {noun}?", f"Where can I {verb} the {noun}?",
             f"To {verb} your {noun}, open Settings, choose Account and follow the steps on screen; "
             f"our team confirms by e-mail within one working day (reference FAQ-{n:03d}).")
            for n, (verb, noun) in enumerate(TOPICS)]


def zh_pairs() -> list[tuple[str, str, str]]:
    return [(f"如何{verb}{noun}？", f"{noun}怎样{verb}？",
             f"{verb}{noun}请打开“设置 → 账户”，按页面提示操作；客服会在一个工作日内通过短信确认（编号 ZH-{n:03d}）。")
            for n, (verb, noun) in enumerate(ZH_TOPICS)]


def faq_xlsx(header: list[str], pairs: list[tuple[str, str, str]], sheet: str = "Sheet1",
             extra: list[list[str]] | None = None) -> bytes:
    book = openpyxl.Workbook()
    book.active.title = sheet
    book.active.append(header)
    for question, alternate, answer in pairs:
        book.active.append([question, alternate, answer, "Support"])
    for row in extra or []:
        book.active.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def faq_csv(header: list[str], pairs: list[tuple[str, str, str]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows([answer, question] for question, _, answer in pairs)  # answer column first
    return out.getvalue().encode("utf-8")


def faq_ods(header: list[str], pairs: list[tuple[str, str, str]]) -> bytes:
    def row(cells: list[str]) -> str:
        return "<table:table-row>" + "".join(
            f'<table:table-cell office:value-type="string"><text:p>{escape(c)}</text:p></table:table-cell>'
            for c in cells) + "</table:table-row>"
    content = ('<?xml version="1.0" encoding="UTF-8"?><office:document-content '
               'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
               'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
               'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2">'
               '<office:body><office:spreadsheet><table:table table:name="常见问题">'
               + row(header) + "".join(row([q, a, ans]) for q, a, ans in pairs)
               + "</table:table></office:spreadsheet></office:body></office:document-content>")
    manifest = ('<?xml version="1.0" encoding="UTF-8"?><manifest:manifest '
                'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
                '<manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.spreadsheet"/>'
                '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/></manifest:manifest>')
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.spreadsheet")
        archive.writestr("META-INF/manifest.xml", manifest)
        archive.writestr("content.xml", content)
    return out.getvalue()


def chunks_of(data: bytes, name: str) -> list[str]:
    document = parse_bytes(data, name)
    return [c.embed_text for c in chunk_document(document, CreationSettings("m")).chunks]


# ---------------------------------------------------------------------- chunking
@pytest.mark.parametrize("header", [["Question", "Similar question", "Answer", "Category"],
                                    ["q", "Alternative question", "A", "category"],
                                    ["问题", "相似问题", "答案", "分类"], ["问", "相似问法", "答：", "分类"]])
def test_each_pair_of_a_long_faq_sheet_is_one_chunk_led_by_its_question(header):
    pairs = en_pairs()
    chunks = chunks_of(faq_xlsx(header, pairs), "faq.xlsx")
    assert len(chunks) == len(pairs)  # one per pair, never two pairs in one, never one cut
    for chunk, (question, alternate, answer) in zip(chunks, pairs):
        assert chunk.startswith(question + "\n") and answer in chunk and alternate in chunk
        assert sum(q in chunk for q, _, _ in pairs) == 1


def test_an_answer_longer_than_a_chunk_is_cut_only_within_its_pair_each_piece_under_its_question():
    long_answer = " ".join(f"Step {n}: unplug the router, wait ten seconds and plug it in again." for n in range(30))
    pairs = [("How do I restart the router?", "", long_answer), *en_pairs()[:3]]
    chunks = chunks_of(faq_xlsx(["Question", "Similar question", "Answer", "Category"], pairs), "faq.xlsx")
    router = [c for c in chunks if c.startswith("How do I restart the router?\n")]
    assert len(router) > 1 and all("Step" in c for c in router)
    assert not any("Step" in c for c in chunks if c not in router)


def test_an_answer_spread_over_rows_stays_with_its_question_and_other_columns_are_kept():
    rows = io.StringIO()
    csv.writer(rows).writerows([["ID", "Question", "Answer", "Link"],
                                ["1", "What are the opening hours?", "Weekdays 9-18.", "https://example.com/hours"],
                                ["", "", "Saturdays 10-14.", ""],
                                ["2", "Is there parking?", "Yes, level -2.", ""],
                                ["3", "Unanswered question?", "", ""]])
    chunks = chunks_of(rows.getvalue().encode(), "faq.csv")
    assert chunks == ["What are the opening hours?\nWeekdays 9-18.\nSaturdays 10-14.\nID: 1\nLink: https://example.com/hours",
                      "Is there parking?\nYes, level -2.\nID: 2"]


def test_a_sheet_without_question_and_answer_headers_stays_a_table():
    rows = io.StringIO()
    csv.writer(rows).writerows([["Product", "Price", "Answerable"], ["Kettle", "25", "yes"], ["Toaster", "30", "no"]])
    document = parse_bytes(rows.getvalue().encode(), "prices.csv")
    assert [s.is_table for s in document.sections] == [True]
    assert "| Product | Price | Answerable |" in chunks_of(rows.getvalue().encode(), "prices.csv")[0]


# ---------------------------------------------------------------------- retrieval
async def _ingest(harness: Harness, name: str, data: bytes) -> str:
    result = await harness.ingest(KB, name, data)
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    return result.document_id


@pytest.mark.parametrize("mode", ["hybrid", "vector", "keyword"])
async def test_a_paraphrased_question_ranks_its_pair_first_with_the_answer(harness: Harness, mode):
    await _ingest(harness, "faq.xlsx", faq_xlsx(["Question", "Similar question", "Answer", "Category"], en_pairs()))
    await _ingest(harness, "faq_zh.csv", faq_csv(["答案", "问题"], zh_pairs()))
    for question, _, answer in en_pairs()[::5]:
        verb, noun = question.removeprefix("How do I ").removesuffix("?").split(" my ")
        texts = await harness.texts(KB, f"what steps to {verb} {noun}", settings={"search_mode": mode, "source_line": False})
        assert texts[0].startswith(question) and answer in texts[0], (mode, question, texts[0][:120])
        assert sum(q in texts[0] for q, _, _ in en_pairs()) == 1
    for question, _, answer in zh_pairs()[::3]:
        verb, noun = question.removeprefix("如何").removesuffix("？")[:2], question.removeprefix("如何").removesuffix("？")[2:]
        texts = await harness.texts(KB, f"请问{noun}要怎么{verb}", settings={"search_mode": mode, "source_line": False})
        assert texts[0].startswith(question) and answer in texts[0], (mode, question, texts[0][:120])


async def test_an_alternative_question_finds_its_pair_and_the_file_is_named_by_its_sheet(harness: Harness):
    file_id = await _ingest(harness, "faq.ods", faq_ods(["问题", "相似问题", "答案"], zh_pairs()))
    response = await harness.retrieve(KB, "电子发票怎样申请", settings={"search_mode": "keyword", "source_line": False})
    top = response.results[0]
    assert top.content[0].text.startswith("如何申请电子发票？") and "ZH-002" in top.content[0].text
    assert top.metadata["file_id"] == file_id and top.metadata["document_name"] == "常见问题"


@pytest.mark.parametrize("name", ["faq.xlsx", "faq.csv"])
async def test_an_faq_without_answers_fails_saying_so_not_that_the_sheet_is_empty(harness: Harness, name: str):
    questions = [q for q, _, _ in en_pairs()[:3]]
    if name.endswith(".xlsx"):
        data = faq_xlsx(["Question", "Alternative", "Answer"], [(q, "", "") for q in questions], sheet="Help")
    else:
        data = ("Question,Answer\n" + "".join(f"{q},\n" for q in questions)).encode()
    result = await harness.ingest(KB, name, data)
    assert result.status == DocumentStatus.FAILED
    assert "question and answer columns but no row with both a question and an answer" in result.error_message
    assert "Fill in the answers" in result.error_message
    assert "empty" not in result.error_message and "no data rows" not in result.error_message
    if name.endswith(".xlsx"):
        assert "“Help”" in result.error_message
