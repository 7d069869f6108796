"""The record cache (lucidrag/state/recordcache.py) keeps decoded FileRecords within a byte budget,
the least recently used going first: what bounds the plugin's memory on a KB of a million chunks
(a record evicted too early costs a plugin-storage read; one kept too long, memory).

Written against the survivors of a mutation run of recordcache.py (docs/TESTING.md).
"""

from __future__ import annotations

import sys

from lucidrag.state.recordcache import CACHE_BYTES, RecordCache, record_size
from lucidrag.state.records import ChunkRecord, FileRecord


def record(file_id: str, chunks: int = 3, text: str = "泵的密封每九百小时更换一次。" * 20, heading: str = "泵 › 密封",
           parents: int = 0) -> FileRecord:
    return FileRecord(file_id, "txt", [ChunkRecord(f"{file_id}-{i}", file_id, i, f"{i} {text}", heading)
                                       for i in range(chunks)],
                      [f"{p} " + text * 3 for p in range(parents)])


def held(r: FileRecord) -> int:
    """The memory a decoded record's objects take, as CPython reports it."""
    strings = [s for c in r.chunks for s in (c.chunk_id, c.file_id, c.text, c.heading, c.document_name)] + r.parents
    return (sum(sys.getsizeof(s) for s in strings) + sum(sys.getsizeof(c) for c in r.chunks)
            + sys.getsizeof(r.chunks) + sys.getsizeof(r.parents) + sys.getsizeof(r))


def test_a_records_size_estimate_is_close_below_what_a_cjk_record_holds():
    """The budget bounds memory: for the mostly CJK records it is sized for, the estimate counts
    texts, headings and parents (2 bytes a character) and each chunk's objects, a little below
    what CPython reports (64 MiB of estimate are at most ~90 MiB held)."""
    for r in (record("long"), record("headed", heading="泵 › 密封 › 更换 › 步骤" * 10),
              record("parents", parents=4), record("many-small", chunks=200, text="短句子。" * 25, heading="")):
        assert 0.7 * held(r) <= record_size(r) <= held(r), r.file_id


def test_the_cache_keeps_the_most_recently_used_records_within_its_budget():
    a, b, c = record("a"), record("b"), record("c")
    cache = RecordCache(budget=record_size(a) + record_size(b))
    assert RecordCache().budget == CACHE_BYTES and cache.bytes == 0
    cache.put(a)
    cache.put(b)
    assert len(cache) == 2 and cache.bytes == record_size(a) + record_size(b), "exactly the budget: both kept"
    assert cache.get("a") is a  # now the most recently used
    cache.put(c)
    assert "b" not in cache and "a" in cache and "c" in cache and cache.get("b") is None
    assert cache.bytes == record_size(a) + record_size(c)


def test_a_record_put_again_counts_once_and_a_dropped_one_not_at_all():
    a, b = record("a"), record("b", chunks=5)
    cache = RecordCache(budget=10 * record_size(b))
    cache.put(a)
    cache.put(a)
    newer = record("a", chunks=4)
    cache.put(newer)
    assert len(cache) == 1 and cache.get("a") is newer and cache.bytes == record_size(newer)
    cache.put(b)
    cache.drop("a")
    cache.drop("never-cached")
    assert "a" not in cache and cache.bytes == record_size(b)
    cache.clear()
    assert len(cache) == 0 and cache.bytes == 0 and "b" not in cache


def test_a_record_bigger_than_the_budget_stays_alone_while_it_is_used():
    small, big = record("small", chunks=1), record("big", chunks=50)
    cache = RecordCache(budget=record_size(big) // 2)
    cache.put(small)
    cache.put(big)
    assert "big" in cache and "small" not in cache and cache.bytes == record_size(big)
