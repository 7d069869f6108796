"""The source line a passage's content starts with, so that a runner that gives the model only the
content (LangBot's LocalAgent prints `[n] text`) still tells it where each passage comes from:
the document's name, its heading path and the page, each said once, labelled in the passage's
own language (English, Simplified or Traditional Chinese, Japanese).

A blank line follows it: LangBot's chat renders Markdown, where a single line break joins the
source line to the passage's first sentence. A blank line keeps it a paragraph of its own there
(and lets a table or list that opens the passage render as one), and reads the same as plain text."""

from __future__ import annotations

import re
from typing import Literal

Language = Literal["en", "zh_Hans", "zh_Hant", "ja"]

LABELS: dict[Language, str] = {"en": "Source: ", "zh_Hans": "来源：", "zh_Hant": "來源：", "ja": "出典："}
PAGE: dict[Language, str] = {"en": "p. {}", "zh_Hans": "第 {} 页", "zh_Hant": "第 {} 頁", "ja": "{} ページ"}
HEADING_SEPARATOR = " › "  # as between the levels of a heading path (chunking.HEADING_SEPARATOR)
SAMPLE_CHARS = 400  # the passage's language is told from its first characters
SOURCE_BREAK = "\n\n"  # between the source line and the passage (see above)

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_KANA = re.compile(r"[\u3040-\u30ff]")
_LATIN = re.compile(r"[A-Za-z]")
# Frequent characters written differently in the two scripts (simplified / traditional).
_SIMPLIFIED = re.compile("[这们个来时说会对于为与学国发过经动进长问间关题应实现开书车马门东见电后么没还让从样种头总区号业万产两网]")
_TRADITIONAL = re.compile("[這們個來時說會對於為與學國發過經動進長問間關題應實現開書車馬門東見電後麼沒還讓從樣種頭總區號業萬產兩網]")


def language_of(text: str) -> Language:
    """Chinese when its Han characters outnumber a third of its Latin letters (one character says
    about as much as a short word); Japanese when kana are among them; Traditional when more of
    its characters are written the traditional way than the simplified way."""
    sample = text[:SAMPLE_CHARS]
    han, kana, latin = len(_HAN.findall(sample)), len(_KANA.findall(sample)), len(_LATIN.findall(sample))
    if (han + kana) * 3 < latin or han + kana == 0:
        return "en"
    if kana * 10 >= han + kana:
        return "ja"
    return "zh_Hant" if len(_TRADITIONAL.findall(sample)) > len(_SIMPLIFIED.findall(sample)) else "zh_Hans"


def with_source_line(content: str, document_name: str, heading: str, page: int | None) -> str:
    """`content` (which starts with `heading`, the heading path, on a line of its own when there is
    one) with that line replaced by the source line and a blank line: the name (left out when the
    heading path starts with it), the heading path and the page."""
    body = content[len(heading) + 1:] if heading and content.startswith(heading + "\n") else content
    if heading and body is content:
        heading = ""  # the content does not start with it: the source line names the document only
    language = language_of(body or content)
    path = [part for part in (document_name if not heading.startswith(document_name) else "", heading) if part]
    source = HEADING_SEPARATOR.join(path)
    if page:
        source = f"{source} · {PAGE[language].format(page)}" if source else PAGE[language].format(page)
    return f"{LABELS[language]}{source}{SOURCE_BREAK}{body}" if source else content


def split_source_line(content: str) -> tuple[str, str] | None:
    """(source, passage) of `content` that starts with a source line (the source without its
    label), else None."""
    first, _, rest = content.partition("\n")
    label = next((label for label in LABELS.values() if first.startswith(label)), None)
    if label is None:
        return None
    return first[len(label):], rest.removeprefix("\n")  # the blank line after it
