"""Reading back what the vector DB holds: the source of truth every derived state is rebuilt from.

Pages by offset within Milvus' query window (offset + limit <= 16384); beyond it, lists files not
seen yet (`file_id $nin`). All functions may raise the host's errors; callers decide what a failure means.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lucidrag.base.host import HostApi

LIST_PAGE = 500
LIST_WINDOW = 16384  # Milvus refuses a query with offset + limit beyond this


async def file_vectors(host: HostApi, collection_id: str, file_id: str, chunk_ids: Sequence[str] = (),
                       chunk_id_at: Callable[[int], str] | None = None) -> list[dict[str, Any]]:
    """Every stored item of one file. Offset pages reach LIST_WINDOW items at most (Milvus' query
    window); a file with more is read on by id, LIST_PAGE ids per call (`uuid $in`): those of
    `chunk_ids` (the file's chunk ids, when its chunk count is known) not listed yet, else the ids
    `chunk_id_at(0)`, `chunk_id_at(1)`, ... (the file's deterministic ids) until a page of ids not
    listed yet finds none."""
    out: list[dict[str, Any]] = []
    offset = 0
    while True:
        if offset + LIST_PAGE > LIST_WINDOW:
            break  # the window is full: the rest only by id
        page = await host.vector_list(collection_id, filters={"file_id": file_id}, limit=LIST_PAGE, offset=offset)
        batch = (page or {}).get("items") or []
        out.extend(batch)
        if len(batch) < LIST_PAGE:
            return out
        offset += len(batch)
    seen = {str(item.get("id")) for item in out}
    if not chunk_ids and chunk_id_at is not None:
        return out + await _read_on_by_index(host, collection_id, chunk_id_at, seen)
    rest = [c for c in chunk_ids if c not in seen]
    for start in range(0, len(rest), LIST_PAGE):
        ids = rest[start : start + LIST_PAGE]
        page = await host.vector_list(collection_id, filters={"uuid": {"$in": ids}}, limit=LIST_PAGE, offset=0)
        out.extend(i for i in (page or {}).get("items") or [] if str(i.get("id")) not in seen)
    return out


async def _read_on_by_index(host: HostApi, collection_id: str, chunk_id_at: Callable[[int], str],
                            seen: set[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    start = 0
    while True:
        ids = [c for c in map(chunk_id_at, range(start, start + LIST_PAGE)) if c not in seen]
        start += LIST_PAGE
        if not ids:
            continue  # every id of this page was listed already
        page = await host.vector_list(collection_id, filters={"uuid": {"$in": ids}}, limit=LIST_PAGE, offset=0)
        found = [i for i in (page or {}).get("items") or [] if str(i.get("id")) not in seen]
        out.extend(found)
        seen.update(str(i.get("id")) for i in found)
        if not found and len(ids) == LIST_PAGE:
            return out  # a whole page of ids past the file's last chunk


async def stored_ids(host: HostApi, collection_id: str, ids: Sequence[str]) -> set[str]:
    """Which of these vector ids the collection holds, LIST_PAGE ids per call (`uuid $in`)."""
    found: set[str] = set()
    for start in range(0, len(ids), LIST_PAGE):
        batch = list(ids[start : start + LIST_PAGE])
        page = await host.vector_list(collection_id, filters={"uuid": {"$in": batch}}, limit=LIST_PAGE, offset=0)
        found.update(str(i.get("id")) for i in (page or {}).get("items") or [])
    return found


async def holds_file(host: HostApi, collection_id: str, file_id: str) -> bool:
    """Whether the collection holds a vector of this file (one call)."""
    page = await host.vector_list(collection_id, filters={"file_id": file_id}, limit=1, offset=0)
    return bool((page or {}).get("items"))


async def holds_other_files(host: HostApi, collection_id: str, file_ids: Sequence[str]) -> bool:
    """Whether the collection holds a vector of a file other than these (one call)."""
    page = await host.vector_list(collection_id, filters={"file_id": {"$nin": list(file_ids)}}, limit=1, offset=0)
    return bool((page or {}).get("items"))


def file_ids_of(items) -> set[str]:
    return {str(f) for f in ((i.get("metadata") or {}).get("file_id") for i in items) if f}


class FileDiscovery:
    """Every file id a collection holds, found one listing page per `step`, so that the search can
    be spread over many invocations: offset pages while Milvus' window allows, then pages of
    files not seen yet (`file_id $nin`, offset 0) until none is left."""

    def __init__(self) -> None:
        self.known: set[str] = set()
        self.offset = 0
        self.done = False

    async def step(self, host: HostApi, collection_id: str) -> set[str]:
        """One listing call; returns the file ids it found for the first time."""
        within_window = self.offset + LIST_PAGE <= LIST_WINDOW
        if within_window:
            page = await host.vector_list(collection_id, limit=LIST_PAGE, offset=self.offset)
        else:
            page = await host.vector_list(collection_id, filters={"file_id": {"$nin": sorted(self.known)}},
                                          limit=LIST_PAGE, offset=0)
        batch = (page or {}).get("items") or []
        new = file_ids_of(batch) - self.known
        self.known |= new
        if within_window:
            self.offset += len(batch)
            self.done = len(batch) < LIST_PAGE
        else:
            self.done = not new  # everything still listed belongs to files already found
        return new
