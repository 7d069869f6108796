"""Question-and-answer text: an FAQ written as lines ("Q: …" / "A: …", "问：…" / "答：…") in a
plain-text, Markdown, Word, PDF or web page becomes one section per pair, its question the heading
of its answer, as an FAQ sheet's rows do (faq.py): every passage of a long answer carries the
question it answers, in the embedded text, the keyword index's heading field and the result.

A question is a line that starts with a question mark-word (`Q`, `Question`, `问`, `问题`, …,
optionally numbered: `Q3.`) and a colon, full stop or 、, or in brackets (`【问】`, `[Q]`); in a
section without such lines, a numbered line that ends in a question mark ("1. How do I …?",
"2、如何…？"). Its answer is every line up to the next question, without a leading answer
mark-word (`A:`, `Answer:`, `答：`, `【答】`, …) when it has one. A section is read this way only
when it holds at least MIN_PAIRS questions that each have an answer (numbered ones numbered one
after another: in "1. What is in the box? … 2. Installation … 3. How do I reset? …" the numbers
are headings): a lettered list ("A. …", "B. …") has no question line, a numbered list of
questions has no answers, and a transcript line "Q: …" alone is left as it is. Text before the first question stays where it was, except a
single short line, which is the FAQ's title and heads every pair.
"""

from __future__ import annotations

import re

from lucidrag.base.limits import MAX_HEADING_CHARS, TITLE_MAX_CHARS
from lucidrag.ingestion.document import Section

from ._common import clip_heading

MIN_PAIRS = 2

# "Q:", "Q3.", "**Q:**", "问：", "问1、", "【问】", "[Q]"; one way to match each run of spaces (no
# quadratic backtracking)
_MARK_END = r"[ \t]*(?:\d{1,3}[ \t]*)?(?:[:：.．、]|[】\]][:：]?)[*_]*[ \t]*"
_LEAD = r"^[ \t>*_#-]*[【\[]?"  # quote, emphasis, heading or bullet marks, a bracket before the word
_QUESTION = re.compile(_LEAD + r"(?:q|question|问|问题|提问|問|問題|提問)" + _MARK_END + r"(?P<text>\S.*)$",
                       re.IGNORECASE)
_ANSWER = re.compile(_LEAD + r"(?:a|answer|答|答案|回答|答复|答覆|回覆)" + _MARK_END, re.IGNORECASE)
# "1. How do I …?", "2、如何…？", "(3) …?", "四、…？": a numbered line ending in a question mark
_HAN_NUMERAL = "[一二三四五六七八九]?十[一二三四五六七八九]?|[一二三四五六七八九]"  # 1-99
_NUMBERED_QUESTION = re.compile(r"^[ \t>*_#-]*[(（]?(?P<number>\d{1,3}|" + _HAN_NUMERAL + r")[ \t]*[.．、)）][*_]*"
                                r"[ \t]*(?P<text>\S.*[?？])[*_ \t]*$")
_HAN_DIGITS = {c: n for n, c in enumerate("一二三四五六七八九", 1)}


def question_answer_sections(section: Section) -> list[Section] | None:
    """The section as question–answer sections, or None when it is not an FAQ."""
    if section.is_table or section.picture is not None:
        return None
    lines = section.text.split("\n")
    for question_line in (_QUESTION, _NUMBERED_QUESTION):  # marked questions first
        first, pairs = _pairs(lines, question_line)
        if pairs:
            return _sections(section, "\n".join(lines[:first]).strip(), pairs)
    return None


def _pairs(lines: list[str], question_line: re.Pattern[str]) -> tuple[int, list[tuple[str, str]]]:
    """(first question's line, [(question, answer)]), or (0, []) unless every question of at least
    MIN_PAIRS has an answer."""
    found = [(i, match) for i, line in enumerate(lines) if (match := question_line.match(line))]
    if len(found) < MIN_PAIRS:
        return 0, []
    if question_line is _NUMBERED_QUESTION and not _consecutive([_number(m.group("number")) for _, m in found]):
        return 0, []  # other numbered items between them ("2. Installation"): headings, not an FAQ
    pairs: list[tuple[str, str]] = []
    for n, (start, match) in enumerate(found):
        end = found[n + 1][0] if n + 1 < len(found) else len(lines)
        question = match.group("text").strip(" \t*_")
        answer = _without_answer_mark(lines[start + 1 : end]).strip()
        if not question or not answer:
            return 0, []  # a question without an answer: not an FAQ written this way
        pairs.append((question, answer))
    return found[0][0], pairs


def _sections(section: Section, preamble: str, pairs: list[tuple[str, str]]) -> list[Section]:
    """The preamble (as a title or a section of its own) and a section per pair, its headings
    clipped as every parser's are (`clip_heading`)."""
    headings = section.headings
    out: list[Section] = []
    if preamble and not headings and "\n" not in preamble and len(preamble) <= TITLE_MAX_CHARS:
        headings = (clip_heading(preamble),)
    elif preamble:
        out.append(Section(preamble, section.headings, section.page))
    for question, answer in pairs:
        if len(question) > MAX_HEADING_CHARS:  # the heading is clipped: the text keeps it whole
            answer = f"{question}\n{answer}"
        out.append(Section(answer, (*headings, clip_heading(question)), section.page))
    return out


def _number(numeral: str) -> int:
    """1-999 in Arabic digits, 1-99 in Chinese numerals (九, 十二, 二十, 二十三)."""
    if numeral.isdigit():
        return int(numeral)
    tens, ten, units = numeral.partition("十")
    if not ten:
        return _HAN_DIGITS[numeral]
    return (_HAN_DIGITS[tens] if tens else 1) * 10 + (_HAN_DIGITS[units] if units else 0)


def _consecutive(numbers: list[int]) -> bool:
    return all(b == a + 1 for a, b in zip(numbers, numbers[1:]))


def _without_answer_mark(lines: list[str]) -> str:
    for i, line in enumerate(lines):
        if line.strip():
            mark = _ANSWER.match(line)
            if mark is not None:
                lines = [*lines[:i], line[mark.end() :], *lines[i + 1 :]]
            break
    return "\n".join(lines)
