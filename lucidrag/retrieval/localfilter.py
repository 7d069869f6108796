"""Metadata filters evaluated by LucidRAG, so they mean the same on every vector backend.

LangBot's Milvus and pgvector adapters keep only text / file_id / uuid and silently drop a filter
clause on any other key, and `$and`/`$or` altogether, so a filter on `page`, `heading`, `format` or
several keys would return unfiltered results there. Instead the filter selects chunks locally over
the KB's FileRecords; the backend is asked only for the files they belong to (`file_id` /
`file_id $in`, which all adapters support), for as many vectors as those files have (their
document vectors included), so every matching chunk can be found; the results are then cut to the
matching chunks and those files' document vectors.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lucidrag.base.host import HostApi
from lucidrag.retrieval.filters import matches
from lucidrag.state.kbstate import KnowledgeBaseState
from lucidrag.state.records import document_vector_id, file_vector_count

MAX_FILTER_FETCH = 16384  # the most a backend returns from one search (Milvus' top-k limit)


@dataclass(frozen=True)
class Selection:
    """What a filter selects: the files, and the chunks within them (None = all their chunks)."""

    file_ids: set[str]
    chunk_ids: set[str] | None
    vector_count: int  # vectors of the selected files (chunks and document vectors)


async def select(host: HostApi, state: KnowledgeBaseState, collection_id: str, where: Mapping[str, Any]) -> Selection:
    """A filter on `file_id` alone needs only the index; one on chunk metadata reads the records
    of the files it may match (plugin storage, through the state's record cache): those it names
    when it is limited to named files (`file_id` and `page`), else every file's, which costs more."""
    if fields_of(where) <= {"file_id"}:
        files = {f for f in state.known_files() if matches(where, {"file_id": f})}
        return Selection(files, None, sum(file_vector_count(state.index.chunk_count(f)) for f in files))
    chunk_ids: set[str] = set()
    files: set[str] = set()
    total = 0
    named = file_scope(where)
    candidates = state.known_files() if named is None else state.known_files() & named
    records = await state.file_records(host, collection_id, sorted(candidates))
    for record in records.values():
        hit = [c.chunk_id for c in record.chunks if matches(where, c.metadata(record.format))]
        if hit:
            chunk_ids.update(hit)
            files.add(record.file_id)
            total += file_vector_count(len(record.chunks))
    return Selection(files, chunk_ids, total)


class Selector:
    """`select` for one query, each filter evaluated once: both halves of a hybrid search (and a
    retried vector search) use the same selection instead of reading every record again."""

    def __init__(self, host: HostApi, state: KnowledgeBaseState, collection_id: str) -> None:
        self._host = host
        self._state = state
        self._collection_id = collection_id
        self._done: dict[str, Selection] = {}

    async def select(self, where: Mapping[str, Any]) -> Selection:
        key = json.dumps(where, sort_keys=True, default=str)
        if key not in self._done:
            self._done[key] = await select(self._host, self._state, self._collection_id, where)
        return self._done[key]


class LocalFilterHost:
    """The host, except that a filtered `vector_search` is evaluated against the KB's FileRecords
    (through the query's `Selector`)."""

    def __init__(self, host: HostApi, selector: Selector) -> None:
        self._host = host
        self._selector = selector

    def __getattr__(self, name: str) -> Any:
        return getattr(self._host, name)

    async def vector_search(self, collection_id: str, query_vector: list[float], top_k: int = 5,
                            filters: dict[str, Any] | None = None, search_type: str = "vector",
                            query_text: str = "", vector_weight: float | None = None) -> list[dict[str, Any]]:
        if not filters:
            return await self._host.vector_search(collection_id, query_vector, top_k=top_k,
                                                  search_type=search_type, query_text=query_text,
                                                  vector_weight=vector_weight)
        selection = await self._selector.select(filters)
        if not selection.file_ids:
            return []
        files = sorted(selection.file_ids)
        fetch = top_k if selection.chunk_ids is None else min(MAX_FILTER_FETCH, max(top_k, selection.vector_count))
        pushed = {"file_id": files[0]} if len(files) == 1 else {"file_id": {"$in": files}}
        results = await self._host.vector_search(collection_id, query_vector, top_k=fetch, filters=pushed,
                                                 search_type=search_type, query_text=query_text,
                                                 vector_weight=vector_weight)
        if selection.chunk_ids is not None:
            wanted = selection.chunk_ids | {document_vector_id(f) for f in files}
            results = [r for r in results if str(r.get("id")) in wanted]
        else:
            results = [r for r in results if str((r.get("metadata") or {}).get("file_id")) in selection.file_ids]
        return results[:top_k]


def fields_of(where: Mapping[str, Any]) -> set[str]:
    out: set[str] = set()
    for key, value in where.items():
        if key in ("$and", "$or"):
            for part in value:
                out |= fields_of(part)
        else:
            out.add(key)
    return out


def file_scope(where: Mapping[str, Any]) -> set[str] | None:
    """The only files `where` can match, when it limits `file_id` to named ones (`$eq` / `$in`,
    under `$and`, or in every branch of an `$or`); None when any file may match."""
    scopes: list[set[str]] = []
    for key, value in where.items():
        if key in ("$and", "$or"):
            parts = [file_scope(part) for part in value]
            if key == "$and":
                scopes.extend(p for p in parts if p is not None)
            elif parts and all(p is not None for p in parts):
                scopes.append(set().union(*parts))  # type: ignore[arg-type]
        elif key == "file_id" and isinstance(value, Mapping) and len(value) == 1:
            op, operand = next(iter(value.items()))
            if op == "$eq":
                scopes.append({operand} if isinstance(operand, str) else set())
            elif op == "$in":
                scopes.append({v for v in operand if isinstance(v, str)})
    return set.intersection(*scopes) if scopes else None
