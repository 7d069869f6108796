"""Question-and-answer text: an FAQ written as lines ("Q: …" / "A: …", "问：…" / "答：…") in a
plain-text, Markdown, Word, PDF or web page becomes one section per pair, its question the heading
of its answer, as an FAQ sheet's rows do (faq.py): every passage of a long answer carries the
question it answers, in the embedded text, the keyword index's heading field and the result.

A question is a line that starts with a question mark-word (`Q`, `Question`, `问`, `问题`, …,
optionally numbered: `Q3.`) and a colon, full stop or 、, or in brackets (`【问】`, `[Q]`); its
answer is every line up to the next question, without a leading answer mark-word (`A:`,
`Answer:`, `答：`, `【答】`, …) when it has one. A section is read this way only when it holds at
least MIN_PAIRS questions that each have an answer: a lettered list ("A. …", "B. …") has no
question line, and a transcript line "Q: …" alone is left as it is. Text before the first
question stays where it was, except a single short line, which is the FAQ's title and heads
every pair.
"""

from __future__ import annotations

import re

from lucidrag.base.limits import MAX_HEADING_CHARS, TITLE_MAX_CHARS
from lucidrag.ingestion.document import Section

MIN_PAIRS = 2

# "Q:", "Q3.", "**Q:**", "问：", "问1、", "【问】", "[Q]"; one way to match each run of spaces (no
# quadratic backtracking)
_MARK_END = r"[ \t]*(?:\d{1,3}[ \t]*)?(?:[:：.．、]|[】\]][:：]?)[*_]*[ \t]*"
_LEAD = r"^[ \t>*_#-]*[【\[]?"  # quote, emphasis, heading or bullet marks, a bracket before the word
_QUESTION = re.compile(_LEAD + r"(?:q|question|问|问题|提问|問|問題|提問)" + _MARK_END + r"(?P<text>\S.*)$",
                       re.IGNORECASE)
_ANSWER = re.compile(_LEAD + r"(?:a|answer|答|答案|回答|答复|答覆|回覆)" + _MARK_END, re.IGNORECASE)


def question_answer_sections(section: Section) -> list[Section] | None:
    """The section as question–answer sections, or None when it is not an FAQ."""
    if section.is_table or section.picture is not None:
        return None
    lines = section.text.split("\n")
    starts = [i for i, line in enumerate(lines) if _QUESTION.match(line)]
    if len(starts) < MIN_PAIRS:
        return None
    pairs: list[tuple[str, str]] = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        question = _QUESTION.match(lines[start]).group("text").strip(" \t*_")  # type: ignore[union-attr]
        answer = _without_answer_mark(lines[start + 1 : end]).strip()
        if not question or not answer:
            return None  # a question without an answer: not an FAQ written this way
        pairs.append((question, answer))
    headings = section.headings
    out: list[Section] = []
    preamble = "\n".join(lines[: starts[0]]).strip()
    if preamble and not headings and "\n" not in preamble and len(preamble) <= TITLE_MAX_CHARS:
        headings = (preamble,)
    elif preamble:
        out.append(Section(preamble, section.headings, section.page))
    for question, answer in pairs:
        if len(question) > MAX_HEADING_CHARS:  # the heading is clipped: the text keeps it whole
            answer = f"{question}\n{answer}"
        out.append(Section(answer, (*headings, question), section.page))
    return out


def _without_answer_mark(lines: list[str]) -> str:
    for i, line in enumerate(lines):
        if line.strip():
            mark = _ANSWER.match(line)
            if mark is not None:
                lines = [*lines[:i], line[mark.end() :], *lines[i + 1 :]]
            break
    return "\n".join(lines)
