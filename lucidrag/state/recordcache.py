"""FileRecords kept in memory only while they are useful: the most recently used, up to a byte budget.

A knowledge base of a million chunks holds ~1.3 GB of records (texts, headings, parents) as
Python objects, more than the whole plugin may use. Retrieval needs the records of the few files
its results come from, so records are read from plugin storage when needed and the recently used
ones stay cached.
"""

from __future__ import annotations

from collections import OrderedDict

from lucidrag.state.records import FileRecord

CACHE_BYTES = 64 * 1024 * 1024
_OBJECT_OVERHEAD = 200  # bytes per chunk beyond its text: the ChunkRecord, its strings' headers


def record_size(record: FileRecord) -> int:
    """Approximate memory of a decoded record (Python str of mostly CJK text: 2-4 bytes/char)."""
    text = sum(len(c.text) + len(c.heading) for c in record.chunks) + sum(len(p) for p in record.parents)
    return 2 * text + _OBJECT_OVERHEAD * (len(record.chunks) + 1)


class RecordCache:
    def __init__(self, budget: int | None = None) -> None:
        self.budget = CACHE_BYTES if budget is None else budget
        self._records: OrderedDict[str, tuple[FileRecord, int]] = OrderedDict()
        self.bytes = 0

    def get(self, file_id: str) -> FileRecord | None:
        entry = self._records.get(file_id)
        if entry is None:
            return None
        self._records.move_to_end(file_id)
        return entry[0]

    def put(self, record: FileRecord) -> None:
        self.drop(record.file_id)
        size = record_size(record)
        self._records[record.file_id] = (record, size)
        self.bytes += size
        while self.bytes > self.budget and len(self._records) > 1:
            _, (_, evicted) = self._records.popitem(last=False)
            self.bytes -= evicted

    def drop(self, file_id: str) -> None:
        entry = self._records.pop(file_id, None)
        if entry is not None:
            self.bytes -= entry[1]

    def clear(self) -> None:
        self._records.clear()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, file_id: object) -> bool:
        return file_id in self._records
