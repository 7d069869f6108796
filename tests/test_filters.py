"""Metadata filters a pipeline passes to retrieve (lucidrag/retrieval/filters.py): which chunks each
operator selects, and the message a filter LucidRAG refuses gets back.

LucidRAG evaluates filters itself over each chunk's metadata (retrieval/localfilter.py), so these
are the semantics on every backend. Written against the survivors of a mutation run of
filters.py (docs/TESTING.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from lucidrag.retrieval.filters import matches, normalise_filters
from lucidrag.state.records import ChunkRecord
from tests.conftest import Harness

KB = "kb-filters"
# what the vectors and the local filter see: pages 1-3, a parent on the first four chunks
CHUNKS = [ChunkRecord(f"c{i}", "f1", i, f"Chunk {i}", "Manual › Seals" if i % 2 else "Manual", page=1 + i // 2,
                      parent=i // 2 if i < 4 else None, document_name="Manual") for i in range(6)]


def selected(filters: dict[str, Any]) -> list[int]:
    where = normalise_filters(filters)
    return [c.index for c in CHUNKS if matches(where, c.metadata("pdf"))]


@pytest.mark.parametrize(("filters", "indexes"), [
    ({"page": {"$gt": 2}}, [4, 5]),
    ({"page": {"$gte": 2}}, [2, 3, 4, 5]),
    ({"page": {"$lt": 2}}, [0, 1]),
    ({"page": {"$lte": 2}}, [0, 1, 2, 3]),
    ({"page": {"$in": [1, 3]}}, [0, 1, 4, 5]),
    ({"page": {"$nin": [1, 3]}}, [2, 3]),
    ({"page": {"$ne": 2}}, [0, 1, 4, 5]),
    ({"heading": "Manual › Seals", "page": 2}, [3]),
    ({"$or": [{"page": 1}, {"chunk_index": 5}]}, [0, 1, 5]),
    ({"parent": {"$gte": 0}}, [0, 1, 2, 3]),  # chunks without a parent have none to compare
    ({"heading": {"$gt": 3}}, []),  # text is never compared with a number
    ({"page": {"$gte": True}}, []),  # nor a number with true / false
    ({"format": {"$in": ["pdf", "docx"]}, "document_name": "Manual"}, [0, 1, 2, 3, 4, 5]),
])
def test_each_operator_selects_the_chunks_whose_metadata_satisfies_it(filters: dict[str, Any], indexes: list[int]):
    assert selected(filters) == indexes


@pytest.mark.parametrize(("filters", "message"), [
    ({"$and": ["file_id"]}, "filters must be an object like {\"file_id\": \"...\"}, got 'file_id'."),
    ({"$and": []}, "filter $and needs a non-empty list of conditions."),
    ({"$or": {"page": 1}}, "filter $or needs a non-empty list of conditions."),
    ({"$not": {"page": 1}}, "Unknown filter operator $not. Use field names at the top level, combined with $and/$or."),
    ({"page": {"$gt": 1, "$lt": 3}}, "filter on page must have exactly one operator, got ['$gt', '$lt']."),
    ({"page": {"$regex": "1"}}, "Unknown filter operator $regex on page. Supported: $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin."),
    ({"page": {"$in": 1}}, "filter page $in needs a list of values."),
    ({"page": {"$nin": [[1]]}}, "filter page $nin needs a list of values."),
    ({"page": {"$gt": [1]}}, "filter page $gt needs a single text or number value."),
    ({"page": [1, 2]}, "filter value for page must be text, a number or true/false."),
])
async def test_a_filter_lucidrag_cannot_evaluate_is_refused_with_what_to_change(harness: Harness, filters: Any,
                                                                               message: str):
    await harness.ingest(KB, "tea.txt", b"Oolong tea is partially oxidised.")
    response = await harness.retrieve(KB, "tea", filters=filters)
    assert response.results == [] and message in response.metadata["error"]
