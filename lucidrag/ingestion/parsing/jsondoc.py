"""JSON / JSON Lines: every leaf flattened to a "path.to.key: value" line (a list of plain values
to one "path: v1, v2, …" line); one section per top-level key (or array element), one section per
line for JSONL."""

from __future__ import annotations

import json
import sys

from lucidrag.base import limits
from lucidrag.base.errors import LimitExceeded, ParseError
from lucidrag.base.limits import MAX_JSON_PATH_CHARS
from lucidrag.ingestion.document import Document, Section

from ._common import clean_text
from .text import decode_text, require_content, too_much_text


def _scalar(value: object) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _clip_path(path: str) -> str:
    """Keep the end of a very deep path: every leaf line repeats its path, so 100,000 leaves
    under 900 levels would otherwise turn 13 KB of JSON into 180 million characters."""
    if len(path) <= MAX_JSON_PATH_CHARS:
        return path
    return "…" + path[-(MAX_JSON_PATH_CHARS - 1):]


class TextBudget:
    """The characters flattened so far: past limits.MAX_DOCUMENT_CHARS the file fails while it is
    flattened, not once every line and Section exists (a 4.8 MB list of 2.4 million numbers became
    2.4 million Sections, +770 MiB, before the characters were counted)."""

    def __init__(self) -> None:
        self.used = 0

    def take(self, chars: int) -> None:
        self.used += chars
        if self.used > limits.MAX_DOCUMENT_CHARS:
            raise too_much_text()


def flatten(value: object, path: str = "", budget: TextBudget | None = None) -> list[str]:
    """Leaves as "path: value" lines, depth first, without recursion."""
    budget = budget or TextBudget()
    lines: list[str] = []

    def emit(line: str) -> None:
        budget.take(len(line) + 1)
        lines.append(line)

    stack: list[tuple[str, object]] = [(path, value)]
    while stack:
        key, node = stack.pop()
        if isinstance(node, dict):
            if not node:
                emit(f"{key}: {{}}" if key else "{}")
            for k, v in reversed(list(node.items())):
                stack.append((_clip_path(f"{key}.{k}" if key else str(k)), v))
        elif isinstance(node, list):
            if not node:
                emit(f"{key}: []" if key else "[]")
            elif not any(isinstance(item, (dict, list)) for item in node):
                # A list of values is one line: a path per element would repeat the path
                # (up to MAX_JSON_PATH_CHARS) for every number in an array of 100,000.
                values = ", ".join(_scalar(item) for item in node)
                emit(f"{key}: {values}" if key else values)
                continue
            for i in range(len(node) - 1, -1, -1):
                stack.append((_clip_path(f"{key}[{i}]"), node[i]))
        else:
            emit(f"{key}: {_scalar(node)}" if key else _scalar(node))
    return lines


def _load(text: str, label: str, line_offset: int = 0) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"This {label} is not valid JSON: {exc.msg} at line {exc.lineno + line_offset}, "
            f"column {exc.colno}. Fix it (or export it again) and upload it again."
        ) from None
    except RecursionError:
        raise LimitExceeded(
            f"This {label} nests its values more than about {sys.getrecursionlimit():,} levels deep, deeper "
            "than the JSON reader follows (Python's recursion limit). Flatten the deepest parts (or save "
            "them as text), then upload it again.") from None


def _section(lines: list[str], headings: tuple[str, ...] = ()) -> Section | None:
    text = clean_text("\n".join(lines))
    return Section(text=text, headings=headings) if text else None


def parse_json(data: bytes, ext: str = ".json") -> Document:
    label = f"{ext} file" if ext else "JSON file"
    text = decode_text(data, label=label).lstrip("\ufeff")
    require_content(text, label)
    if ext in (".jsonl", ".ndjson"):
        return _parse_lines(text, label)
    value = _load(text, label)
    del text
    budget = TextBudget()
    sections: list[Section | None] = []
    if isinstance(value, dict) and value:
        for key, item in value.items():
            sections.append(_section(flatten(item, str(key), budget), (str(key),)))
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            sections.append(_section(flatten(item, f"[{i}]", budget), (f"[{i}]",)))
    else:
        sections.append(_section(flatten(value, budget=budget)))
    result = tuple(s for s in sections if s)
    if not result:
        raise ParseError(f"This {label} holds no values (it is empty).")
    return Document(sections=result, format="json")


def _parse_lines(text: str, label: str) -> Document:
    sections: list[Section] = []
    budget = TextBudget()
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        section = _section(flatten(_load(line, label, line_offset=number - 1), budget=budget))
        if section:
            sections.append(section)
    if not sections:
        raise ParseError(f"This {label} holds no values (it is empty).")
    return Document(sections=tuple(sections), format="jsonl")
