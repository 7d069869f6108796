"""Reading back what the vector DB holds: the source of truth every derived state is rebuilt from.

Pages by offset within Milvus' query window (offset + limit <= 16384); beyond it, lists files not
seen yet (`file_id $nin`). All functions may raise the host's errors; callers decide what a failure means.
"""

from __future__ import annotations

from typing import Any

from lucidrag.base.host import HostApi

LIST_PAGE = 500
LIST_WINDOW = 16384  # Milvus refuses a query with offset + limit beyond this


async def file_vectors(host: HostApi, collection_id: str, file_id: str) -> list[dict[str, Any]]:
    """Every stored item of one file."""
    out: list[dict[str, Any]] = []
    offset = 0
    while offset + LIST_PAGE <= LIST_WINDOW:
        page = await host.vector_list(collection_id, filters={"file_id": file_id}, limit=LIST_PAGE, offset=offset)
        batch = (page or {}).get("items") or []
        out.extend(batch)
        if len(batch) < LIST_PAGE:
            break
        offset += len(batch)
    return out


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
