"""HTML: boilerplate removed with BeautifulSoup (html.parser), the rest converted to Markdown
with markdownify, then split at headings like a Markdown file."""

from __future__ import annotations

import re

from lucidrag.base import limits
from lucidrag.base.errors import LimitExceeded, ParseError
from lucidrag.ingestion.document import Document

from ._common import clean_inline, clean_text
from .markdown_text import markdown_sections
from .text import decode_text, require_content

_META_CHARSET = re.compile(
    rb"""<meta[^>]+?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE
)
_XML_ENCODING = re.compile(rb"""^\s*<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9._:-]+)""")
_TAG_START = re.compile(r"<[A-Za-z]")  # an upper bound of the elements html.parser makes
_DROP = ("script", "style", "nav", "header", "footer", "noscript", "svg", "form", "iframe",
         "template", "button", "select", "object", "embed", "canvas", "map", "dialog")


def declared_charset(data: bytes) -> str:
    head = data[:4096]
    match = _META_CHARSET.search(head) or _XML_ENCODING.search(head)
    return match.group(1).decode("ascii", "ignore") if match else ""


def parse_html(data: bytes, ext: str = ".html") -> Document:
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    label = f"{ext} file" if ext else "HTML file"
    text = decode_text(data, label=label, declared=declared_charset(data))
    require_content(text, label)
    tags = len(_TAG_START.findall(text))
    if tags > limits.MAX_HTML_TAGS:
        raise LimitExceeded(
            f"This {label} has {tags:,} tags; LucidRAG reads pages of at most {limits.MAX_HTML_TAGS:,} tags "
            "(MAX_HTML_TAGS), which keeps the memory of reading one bounded. Split the page, or save it "
            "as text or PDF, then upload it.")
    soup = BeautifulSoup(text, "html.parser")
    title = clean_inline(soup.title.get_text()) if soup.title else ""
    for tag in soup.find_all(_DROP):
        tag.decompose()
    if soup.head:
        soup.head.decompose()
    root = soup.body or soup
    _flatten_deep(root, limits.MAX_HTML_DEPTH)
    converter = MarkdownConverter(
        heading_style="ATX", bullets="-", strip=["a", "img"], escape_underscores=False,
        escape_asterisks=False, escape_misc=False, table_infer_header=True,
    )
    markdown = clean_text(converter.convert_soup(root))
    if not markdown:
        raise ParseError(f"This {label} has no visible text (only scripts, styles or navigation).")
    metadata = {"title": title} if title else {}
    return Document(sections=tuple(markdown_sections(markdown)), format="html", metadata=metadata)


def _flatten_deep(root, depth: int) -> None:  # noqa: ANN001 - a BeautifulSoup Tag
    """Elements nested deeper than `depth` become the plain text they hold: the Markdown converter
    recurses once per level (a page of 50,000 nested <div>s ended in RecursionError)."""
    from bs4 import Tag

    deep = []
    stack = [(root, 0)]
    while stack:
        tag, level = stack.pop()
        for child in tag.children:
            if not isinstance(child, Tag):
                continue
            if level < depth:
                stack.append((child, level + 1))
            else:
                deep.append(child)
    for tag in deep:
        tag.replace_with(tag.get_text())
