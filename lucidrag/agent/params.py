"""The tools' parameters as the model sends them, read into typed requests, and the one filter
the search builds from them. The model never writes a filter: it names a file, a format and a
page range, and `search_filter` turns them into LucidRAG's filter language (retrieval/filters.py).
Values out of range are clamped, not refused: a model retries a refusal, a clamp just works."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lucidrag.agent.scope import ToolRefusal

# What a FileRecord's `format` can be: the parser families (ingestion/parsing/registry.py)
FORMATS = ("pdf", "docx", "pptx", "spreadsheet", "delimited", "html", "markdown", "json", "text", "image", "zip")
DEFAULT_TOP_K = 5
MAX_TOP_K = 10
MAX_QUERY_CHARS = 1000
MAX_AROUND = 3  # passages either side of one that read_around returns
DEFAULT_LIST_LIMIT = 20
MAX_LIST_LIMIT = 50


@dataclass(frozen=True)
class SearchRequest:
    query: str
    knowledge_base: str = ""
    file: str = ""
    format: str = ""
    page_from: int | None = None
    page_to: int | None = None
    top_k: int = DEFAULT_TOP_K


@dataclass(frozen=True)
class ListRequest:
    knowledge_base: str = ""
    name_contains: str = ""
    limit: int = DEFAULT_LIST_LIMIT


@dataclass(frozen=True)
class AroundRequest:
    passage_id: str
    before: int = 1
    after: int = 1


def search_request(params: Mapping[str, Any]) -> SearchRequest:
    query = _text(params, "query")[:MAX_QUERY_CHARS]
    if not query:
        raise ToolRefusal("Give `query`: the words or question to search for.")
    file_format = _text(params, "format").lower()
    if file_format and file_format not in FORMATS:
        raise ToolRefusal(f"`format` must be one of: {', '.join(FORMATS)}.")
    page_from, page_to = _page(params, "page_from"), _page(params, "page_to")
    if page_from is not None and page_to is not None and page_to < page_from:
        page_from, page_to = page_to, page_from
    return SearchRequest(query, _text(params, "knowledge_base"), _text(params, "file"), file_format,
                         page_from, page_to, _clamped(params, "top_k", DEFAULT_TOP_K, 1, MAX_TOP_K))


def list_request(params: Mapping[str, Any]) -> ListRequest:
    return ListRequest(_text(params, "knowledge_base"), _text(params, "name_contains"),
                       _clamped(params, "limit", DEFAULT_LIST_LIMIT, 1, MAX_LIST_LIMIT))


def around_request(params: Mapping[str, Any]) -> AroundRequest:
    passage_id = _text(params, "passage_id")
    if not passage_id:
        raise ToolRefusal("Give `passage_id`: the `id` of a passage that lucidrag_search returned.")
    return AroundRequest(passage_id, _clamped(params, "before", 1, 0, MAX_AROUND),
                         _clamped(params, "after", 1, 0, MAX_AROUND))


def search_filter(file_ids: list[str], file_format: str, page_from: int | None,
                  page_to: int | None) -> dict[str, Any] | None:
    """The filter for the search, in the form retrieval/filters.py accepts: a clause per
    constraint, joined with $and. Pages are 0 where a format has none, so a page range leaves
    pageless files out."""
    clauses: list[dict[str, Any]] = []
    if file_ids:
        clauses.append({"file_id": file_ids[0]} if len(file_ids) == 1 else {"file_id": {"$in": sorted(file_ids)}})
    if file_format:
        clauses.append({"format": file_format})
    if page_from is not None:
        clauses.append({"page": {"$gte": page_from}})
    if page_to is not None:
        clauses.append({"page": {"$lte": page_to}})
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def _text(params: Mapping[str, Any], name: str) -> str:
    value = params.get(name)
    return value.strip() if isinstance(value, str) else ""


def _number(params: Mapping[str, Any], name: str) -> int | None:
    value = params.get(name)
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def _page(params: Mapping[str, Any], name: str) -> int | None:
    value = _number(params, name)
    return None if value is None else max(1, value)


def _clamped(params: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = _number(params, name)
    return default if value is None else min(high, max(low, value))
