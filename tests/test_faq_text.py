"""FAQs written as text ("Q: … / A: …", "问：… / 答：…") in .txt, Markdown and Word files: each
question heads its answer's passages, as an FAQ sheet's rows do, and what is not such an FAQ is
left as it was."""

from __future__ import annotations

import io
from datetime import datetime, timezone

import docx
import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from lucidrag.base.settings import CreationSettings
from lucidrag.ingestion.chunking import chunk_document
from lucidrag.ingestion.document import document_name
from lucidrag.ingestion.parsing import parse_bytes
from tests.conftest import Harness
from tests.test_faq_sheets import en_pairs, zh_pairs

KB = "kb-faq-text"


def faq_text(pairs: list[tuple[str, str, str]], question_mark: str, answer_mark: str, title: str = "") -> str:
    """The pairs as text; "{n}" in a mark numbers it."""
    head = f"{title}\n\n" if title else ""
    return head + "\n\n".join(f"{question_mark.format(n=n)}{q}\n{answer_mark.format(n=n)}{a}"
                                for n, (q, _, a) in enumerate(pairs, 1)) + "\n"


def faq_docx(pairs: list[tuple[str, str, str]]) -> bytes:
    document = docx.Document()
    document.add_heading("Customer service", level=1)
    for question, _, answer in pairs:
        document.add_paragraph(f"Q: {question}")
        document.add_paragraph(f"A: {answer}")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def embed_texts(data: bytes, name: str) -> list[str]:
    return [c.embed_text for c in chunk_document(parse_bytes(data, name), CreationSettings("m")).chunks]


@pytest.mark.parametrize(("question_mark", "answer_mark"), [("Q: ", "A: "), ("**Q{n}.** ", "**A{n}.** "), ("Question: ", ""), ("{n}. ", "")])
def test_every_passage_of_a_text_faq_starts_with_its_own_question(question_mark: str, answer_mark: str):
    text = faq_text(en_pairs(), question_mark, answer_mark, title="Acme help centre")
    chunks = embed_texts(text.encode(), "faq.txt")
    for question, _, answer in en_pairs():
        (chunk,) = [c for c in chunks if answer in c]  # one pair, one passage
        assert chunk.startswith(f"Acme help centre › {question}\n{answer}")
        assert sum(q in chunk for q, _, _ in en_pairs()) == 1


@pytest.mark.parametrize(("question_mark", "answer_mark"),
                         [("问：", "答："), ("【问】", "【答】"), ("问题1、", "回答："), ("{n}、", "答："), ("{n}. ", "")])
def test_a_chinese_text_faq_without_a_title_is_named_as_untitled_files_are_not_by_its_first_question(
        question_mark: str, answer_mark: str):
    text = faq_text(zh_pairs(), question_mark, answer_mark)
    document = parse_bytes(text.encode("gbk"), "常见问题.txt")
    assert [s.headings for s in document.sections] == [(q,) for q, _, _ in zh_pairs()]
    assert [s.text for s in document.sections] == [a for _, _, a in zh_pairs()]
    at = datetime(2026, 12, 6, 9, 30, 5, tzinfo=timezone.utc)
    assert document_name(document, at) == "TEXT file, 2026-12-06 09:30:05 UTC"  # two such FAQs stay apart


def chinese_numeral(n: int) -> str:
    digits = "一二三四五六七八九"
    tens, units = divmod(n, 10)
    return ((digits[tens - 1] if tens > 1 else "") + "十" if tens else "") + (digits[units - 1] if units else "")


def test_questions_numbered_in_chinese_numerals_one_after_another_are_read_pair_by_pair():
    questions = [f"第{n}号柜门打不开怎么办？" for n in range(1, 24)]
    text = "\n\n".join(f"{chinese_numeral(n)}、{q}\n请联系前台，报上柜号 {n}。" for n, q in enumerate(questions, 1))
    assert [chinese_numeral(n) for n in (1, 10, 11, 20, 23)] == ["一", "十", "十一", "二十", "二十三"]
    document = parse_bytes(text.encode(), "柜门.txt")
    assert [s.headings for s in document.sections] == [(q,) for q in questions]
    # a numeral skipped ("二、安装" is a heading, not a question): numbered headings, not an FAQ
    manual = "一、柜门打不开怎么办？\n请联系前台。\n\n二、安装\n用螺栓固定。\n\n三、钥匙丢了怎么办？\n补办钥匙。\n"
    assert all(not s.headings for s in parse_bytes(manual.encode(), "手册.txt").sections)


def test_a_word_faq_keeps_its_heading_above_each_question():
    chunks = embed_texts(faq_docx(en_pairs()[:6]), "faq.docx")
    assert [c.split("\n", 1)[0] for c in chunks] == [f"Customer service › {q}" for q, _, _ in en_pairs()[:6]]


def test_a_markdown_faq_under_a_section_heading_is_read_pair_by_pair():
    text = "# Billing\n\n" + faq_text(en_pairs()[:3], "- **Q:** ", "  **A:** ")
    document = parse_bytes(text.encode(), "billing.md")
    assert [s.headings for s in document.sections] == [("Billing", q) for q, _, _ in en_pairs()[:3]]
    assert all(not s.text.startswith(("*", "A")) for s in document.sections)


@pytest.mark.parametrize(("name", "text"), [
    ("choices.txt", "Pick a plan:\nA. Basic\nB. Pro\nC. Enterprise\n"),  # a lettered list has no question
    ("interview.txt", "Notes of the call.\n\nQ: When does the pilot start?\nA: In May.\n\nThe rest was small talk.\n"),
    ("draft.txt", "Q: How do I reset my password?\nQ: How do I cancel my subscription?\nA: Open Settings.\n"),
    ("homework.txt", "Questions for Monday\n1. How do I reset my password?\n2. How do I cancel my subscription?\n"),
    ("agenda.txt", "1. Budget\n2. How do I reset my password?\n3. Any other business\n"),
    # numbered headings, some of them questions: "2. Installation" is no answer to question 1
    ("manual.txt", "1. How do I reset my password?\nHold the button.\n\n2. Installation\nBolt it to the wall.\n\n"
                   "3. How do I cancel my subscription?\nWrite to us.\n"),
    ("config.json", '{"q": "How do I reset my password?", "a": "Open Settings.", '
                    '"q2": {"q": "How do I cancel?", "a": "Write to us."}}'),
])
def test_text_that_is_not_a_question_answer_list_is_left_as_it_was(name: str, text: str):
    # one question alone, a question without its answer, JSON keys: no FAQ sections, no FAQ name
    document = parse_bytes(text.encode(), name)
    assert not any(len(s.headings) and s.headings[-1].startswith("How") for s in document.sections)
    assert document.named_by_heading


async def test_a_question_in_other_words_finds_its_answer_in_a_text_faq(harness: Harness):
    result = await harness.ingest(KB, "help.txt", faq_text(en_pairs(), "Q: ", "A: ", title="Acme help centre").encode())
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    for question, _, answer in en_pairs()[::4]:
        verb, noun = question.removeprefix("How do I ").removesuffix("?").split(" my ")
        for mode in ("keyword", "hybrid"):
            texts = await harness.texts(KB, f"what steps to {verb} {noun}",
                                        settings={"search_mode": mode, "source_line": False})
            assert texts[0].startswith(f"Acme help centre › {question}") and answer in texts[0], (mode, texts[0][:100])
            assert sum(q in texts[0] for q, _, _ in en_pairs()) == 1  # its own pair, no neighbour's
