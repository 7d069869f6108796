"""FAQ sheets: a table whose header names a question and an answer column becomes one section per
question–answer pair, so that a user's question is matched against the FAQ's question.

The header is the table's first non-empty row. A column is a question column when its name is
one of QUESTION_NAMES ("question", "Q", "问题", "问" ...), an answer column when it is one of
ANSWER_NAMES ("answer", "A", "答案", "答" ...), case, spacing and a trailing colon aside;
"similar question", "相似问题", "question 2" and the like are alternative questions. A sheet with
a question and an answer column is an FAQ; any other stays a table.

Each pair is a section whose heading is the question, so it leads every chunk of the pair (in
the embedded text, in the keyword index's heading field and in the result's content), and whose
text is the alternative questions (one line, under their column's own name), the answer, and
the row's other non-empty cells as "column: value" lines. A row without a question continues
the answer above it (an answer spread over several rows); a row without an answer is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from lucidrag.ingestion.document import Section

QUESTION_NAMES = frozenset({
    "question", "questions", "q", "faq", "query", "ask", "user question", "customer question",
    "问题", "问", "提问", "问句", "常见问题", "标准问题", "用户问题", "問題", "問", "提問", "常見問題", "標準問題",
})
ANSWER_NAMES = frozenset({
    "answer", "answers", "a", "reply", "response", "solution", "standard answer",
    "答案", "答", "回答", "回复", "答复", "解答", "标准答案", "回覆", "答覆", "標準答案",
})
_NUMBERED_QUESTION = re.compile(r"(question|q|问题|问|提问|問題|問|提問)\s*[-_#]?\s*\d+")
_ALTERNATE = re.compile(
    r"((similar|alternative|alternate|other|related|more|paraphrased?)\s*(questions?|q)"
    r"|相似问题|相似问法|相似问|类似问题|其他问法|同义问题|扩展问题|相似問題|相似問法|類似問題|其他問法)\s*[-_#]?\s*\d*")
_TRIM = " \t\r\n:：*?？()（）[]【】"


def _name(cell: str) -> str:
    return " ".join(cell.strip(_TRIM).lower().replace("_", " ").split())


@dataclass(frozen=True)
class FaqColumns:
    question: int
    answer: int
    alternates: tuple[int, ...] = ()


def faq_columns(header: list[str]) -> FaqColumns | None:
    """The question, answer and alternative-question columns a header names, if it names an FAQ."""
    names = [_name(cell) for cell in header]
    question = next((i for i, n in enumerate(names) if n in QUESTION_NAMES), None)
    answer = next((i for i, n in enumerate(names) if n in ANSWER_NAMES), None)
    numbered = [i for i, n in enumerate(names) if _NUMBERED_QUESTION.fullmatch(n)]
    if question is None and numbered:
        question = numbered[0]
    if question is None or answer is None or question == answer:
        return None
    alternates = tuple(i for i, n in enumerate(names)
                       if i not in (question, answer) and (i in numbered or _ALTERNATE.fullmatch(n)))
    return FaqColumns(question, answer, alternates)


def _cell(row: list[str], index: int) -> str:
    return " ".join(row[index].split()) if index < len(row) else ""


def faq_sections(header: list[str], columns: FaqColumns, rows: Iterable[list[str]]) -> Iterator[Section]:
    """One section per question–answer pair of the rows under `header`."""
    others = [i for i in range(len(header)) if i not in (columns.question, columns.answer, *columns.alternates)]
    alternate_label = header[columns.alternates[0]].strip(_TRIM) if columns.alternates else ""
    pending: _Pair | None = None
    for row in rows:
        question = _cell(row, columns.question)
        answer = row[columns.answer].strip() if columns.answer < len(row) else ""
        if not question:
            if pending is not None and answer:
                pending.answer.append(answer)  # the answer goes on in this row
            continue
        if pending is not None:
            yield pending.section()
            pending = None
        if not answer:
            continue
        alternates = [a for a in (_cell(row, i) for i in columns.alternates) if a and a != question]
        pending = _Pair(question, [f"{alternate_label}: {' / '.join(alternates)}"] if alternates else [], [answer],
                        [f"{header[i].strip()}: {_cell(row, i)}" for i in others if _cell(row, i) and header[i].strip()])
    if pending is not None:
        yield pending.section()


@dataclass
class _Pair:
    question: str
    alternates: list[str]
    answer: list[str]
    others: list[str]

    def section(self) -> Section:
        return Section(text="\n".join([*self.alternates, *self.answer, *self.others]), headings=(self.question,))
