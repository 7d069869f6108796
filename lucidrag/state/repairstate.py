"""Finding a KB's files in the vector DB when plugin storage does not name them, and its one owner.

```
IDLE ──storage_knows_nothing (the load)──► TO_LOOK ──start_looking──► DISCOVERING ──discovered──► IDLE
  any ──rebuild (the console's repair)──► REBUILDING ──discovered──► REBUILDING (discovery None)
                                              └── indexed_everything ──► IDLE
```

IDLE: storage names the KB's files and its records are trusted. TO_LOOK: storage holds nothing of
the KB, so its files are to be listed in the vector DB, once the collection may be touched (a
listing of a missing Milvus collection creates it with the wrong dimension). DISCOVERING: file ids
are being found page by page (`discovery`); each found file is indexed from its record, else
rebuilt from its vectors. REBUILDING: the same, but no stored record is trusted (each is rebuilt
from the vectors) until every file found is indexed.

Meanwhile vector hits of files without a record are learnt from their metadata (`adopted`), so
that they can be answered with text and citation.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from lucidrag.state.records import ChunkRecord, is_chunk_vector
from lucidrag.state.transitions import require
from lucidrag.vectors.vectorscan import FileDiscovery

ADOPTED_LIMIT = 10_000  # chunks learnt from vector hits without a record (storage lost)


class RepairMode(Enum):
    IDLE = "storage names the files"
    TO_LOOK = "storage names no file: the vector DB is to be listed"
    DISCOVERING = "file ids being found in the vector DB"
    REBUILDING = "every record being rebuilt from the vector DB"


class RepairState:
    def __init__(self) -> None:
        self.mode = RepairMode.IDLE
        self.discovery: FileDiscovery | None = None  # DISCOVERING, and REBUILDING until all are found
        self.adopted: dict[str, ChunkRecord] = {}  # chunk id -> chunk learnt from a vector hit

    @property
    def trust_records(self) -> bool:
        return self.mode is not RepairMode.REBUILDING

    @property
    def finding_files(self) -> bool:
        """Files are still to be found in the vector DB: a file not found yet looks like an orphan."""
        return self.discovery is not None or self.mode is RepairMode.TO_LOOK

    def storage_knows_nothing(self) -> None:
        """IDLE -> TO_LOOK (the load found nothing of the KB in storage)."""
        require("repair", self.mode, (RepairMode.IDLE,), "storage_knows_nothing")
        self.mode = RepairMode.TO_LOOK

    def start_looking(self) -> None:
        """TO_LOOK -> DISCOVERING (the collection may be listed now)."""
        require("repair", self.mode, (RepairMode.TO_LOOK,), "start_looking")
        self.mode = RepairMode.DISCOVERING
        self.discovery = FileDiscovery()

    def rebuild(self) -> None:
        """any -> REBUILDING: every file is found in the vector DB again, no record trusted."""
        self.mode = RepairMode.REBUILDING
        self.discovery = FileDiscovery()
        self.adopted.clear()

    def discovered(self, discovery: FileDiscovery) -> None:
        """`discovery` has found every file (DISCOVERING -> IDLE; REBUILDING stays until indexed)."""
        if self.discovery is not discovery:
            return  # a rebuild started a new one meanwhile
        self.discovery = None
        if self.mode is RepairMode.DISCOVERING:
            self.mode = RepairMode.IDLE

    def indexed_everything(self) -> None:
        """REBUILDING -> IDLE once every file found is indexed (records are trusted again)."""
        if self.mode is RepairMode.REBUILDING and self.discovery is None:
            self.mode = RepairMode.IDLE

    def chunk_from_hit(self, result: dict[str, Any]) -> ChunkRecord | None:
        """The chunk of a vector hit without a record, learnt from its metadata (None: no text)."""
        chunk_id = str(result["id"])
        known = self.adopted.get(chunk_id)
        if known is not None:
            return known
        meta = result.get("metadata") or {}
        file_id, text = meta.get("file_id"), meta.get("text") or result.get("document")
        if not text or not file_id or not is_chunk_vector(chunk_id, meta):
            return None
        index, page = meta.get("chunk_index"), meta.get("page")
        if len(self.adopted) >= ADOPTED_LIMIT:
            self.adopted.clear()
        chunk = self.adopted[chunk_id] = ChunkRecord(
            chunk_id, str(file_id), int(index) if isinstance(index, (int, float)) else 0, str(text),
            str(meta.get("heading") or ""), int(page) if isinstance(page, (int, float)) and page else None,
            document_name=str(meta.get("document_name") or ""),
        )
        return chunk

    def forget_file(self, file_id: str) -> None:
        self.adopted = {c: r for c, r in self.adopted.items() if r.file_id != file_id}
