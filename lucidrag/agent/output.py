"""What a tool answers the model: a JSON object, every passage with its source line, capped in
size (LangBot's LocalAgent cuts a tool's result at 20,000 characters by default; a model reads a
short answer better). An object, not its text: an SDK 0.7.18 runner reports every tool result as
`ToolCallCompletedPayload.result`, a dict, and a tool that returns a string fails there."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lucidrag.retrieval.sources import split_source_line, with_source_line

MAX_PASSAGE_CHARS = 1500
MAX_ANSWER_CHARS = 8000
ELLIPSIS = " …"


@dataclass(frozen=True)
class Passage:
    id: str  # "<kb id>:<file id>:<chunk index>", what read_around takes
    file_id: str
    source: str  # document › heading path · page, in the passage's language
    text: str
    score: float | None = None

    def row(self) -> dict[str, Any]:
        row: dict[str, Any] = {"id": self.id, "source": self.source}
        if self.score is not None:
            row["score"] = round(self.score, 3)
        row["text"] = _clip(self.text, MAX_PASSAGE_CHARS)
        return row


def passage_id(kb_id: str, file_id: str, index: int) -> str:
    return f"{kb_id}:{file_id}:{index}"


def parse_passage_id(value: str) -> tuple[str, str, int] | None:
    parts = value.split(":")
    if len(parts) != 3 or not parts[0] or not parts[1] or not parts[2].isdigit():
        return None
    return parts[0], parts[1], int(parts[2])


def passage(kb_id: str, file_id: str, index: int, content: str, document_name: str, heading: str,
            page: int | None, score: float | None = None) -> Passage:
    """`content` as the KB gives it: led by its source line when the KB's `source_line` setting
    is on (the line is taken from it), else by its heading path (the line is made here)."""
    split = split_source_line(content) or split_source_line(with_source_line(content, document_name, heading, page))
    if split is None:  # nothing to name the passage by: no title, heading or page
        return Passage(passage_id(kb_id, file_id, index), file_id, "", content, score)
    return Passage(passage_id(kb_id, file_id, index), file_id, *split, score)


def passage_from_result(kb_id: str, entry: Mapping[str, Any]) -> Passage | None:
    """One entry of LangBot's retrieve answer (RetrievalResultEntry as JSON) from a LucidRAG KB."""
    meta = entry.get("metadata") if isinstance(entry.get("metadata"), Mapping) else {}
    file_id, index = meta.get("file_id"), meta.get("chunk_index")
    texts = [c.get("text") for c in entry.get("content") or [] if isinstance(c, Mapping)]
    content = "\n".join(t for t in texts if isinstance(t, str))
    if not isinstance(file_id, str) or not isinstance(index, int) or not content:
        return None
    score = entry.get("score")
    page = meta.get("page")
    return passage(kb_id, file_id, index, content, str(meta.get("document_name") or ""),
                   str(meta.get("heading") or ""), page if isinstance(page, int) else None,
                   float(score) if isinstance(score, (int, float)) else None)


def answer(fields: Mapping[str, Any], rows: list[dict[str, Any]], rows_key: str, note: str = "") -> dict[str, Any]:
    """`fields` and as many `rows` as fit in MAX_ANSWER_CHARS, with a note of what was left out."""
    kept: list[dict[str, Any]] = []
    notes = [note] if note else []
    for row in rows:
        if size({**fields, rows_key: kept + [row], "note": " ".join(notes)}) > MAX_ANSWER_CHARS - 200:
            notes.append(f"{len(rows) - len(kept)} more left out to keep this answer short; narrow the request.")
            break
        kept.append(row)
    out = {**fields, rows_key: kept}
    if notes:
        out["note"] = " ".join(notes)
    return out


def refusal(message: str) -> dict[str, Any]:
    return {"error": message}


def size(answer: Mapping[str, Any]) -> int:
    """The answer's length as the model reads it (compact JSON)."""
    return len(_dump(answer))


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - len(ELLIPSIS)].rstrip() + ELLIPSIS
