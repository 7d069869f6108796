"""What a hit shows (lucidrag/retrieval/retrieve.py): the card title and source line LangBot
displays, the neighbour windows and parent passages returned, and how chunks are joined and
collapsed. Written against mutation survivors (docs/TESTING.md)."""

from __future__ import annotations

import asyncio

from lucidrag.base.settings import CreationSettings, RetrievalSettings
from lucidrag.retrieval.fusion import Fused
from lucidrag.retrieval.retrieve import (
    Hit,
    RetrieveRequest,
    _drop_duplicates,
    _expand,
    _Found,
    _neighbours,
    _rerank,
    _within_budget,
    merge_texts,
)
from lucidrag.state.records import ChunkRecord, FileRecord
from tests.conftest import Harness


def chunk(index: int, text: str = "", file_id: str = "f", **kw) -> ChunkRecord:
    return ChunkRecord(f"{file_id}-{index}", file_id, index, text or f"chunk {index} " + "x" * 20, **kw)


def fused(c: ChunkRecord, score: float = 0.5) -> Fused:
    return Fused(c.chunk_id, score, 0.4, 0.7, score)


def request(**settings) -> RetrieveRequest:
    """A request for the passages alone (the source line is tested in test_sources.py)."""
    return RetrieveRequest("kb", "kb", "q", CreationSettings("model"),
                           RetrievalSettings(**{"source_line": False, **settings}), None)


def test_a_hit_without_a_document_name_is_titled_by_its_format_and_shows_its_page():
    meta = Hit(chunk(2, page=None), "text", 0.5, "pdf").metadata()
    assert meta["document_name"] == "PDF file" and meta["page"] == 0 and meta["chunk_index"] == 2
    assert Hit(chunk(2), "text", 0.5, "").metadata()["document_name"] == "UNKNOWN file"
    meta = Hit(chunk(2, page=7, document_name="Zephyr manual"), "text", 0.5, "pdf").metadata()
    assert meta["page"] == 7 and meta["format"] == "pdf" and meta["document_name"] == "Zephyr manual"
    assert meta["citation"] == "Zephyr manual · PDF · p. 7"


def test_a_neighbour_window_takes_window_chunks_each_side_and_no_more():
    record = FileRecord("f", "txt", [chunk(i) for i in range(7)])
    assert [c.index for c in _neighbours(record, record.chunks[3], 1)] == [2, 3, 4]
    assert [c.index for c in _neighbours(record, record.chunks[1], 2)] == [0, 1, 2, 3]
    assert [c.index for c in _neighbours(None, record.chunks[1], 2)] == [1]


def test_a_window_grows_around_its_centre_only_while_it_fits_the_budget():
    span = [chunk(i, "a" * size) for i, size in enumerate([500, 900, 1000, 800, 700])]
    # 1000 + 800 after it; 900 before it would pass 2500, 700 after that fills it exactly
    assert [c.index for c in _within_budget(span, span[2], 2500)] == [2, 3, 4]
    assert [c.index for c in _within_budget(span, span[2], 1800)] == [2, 3]
    assert [c.index for c in _within_budget(span, span[2], 1799)] == [2]
    assert [c.index for c in _within_budget(span, span[0], 10_000)] == [0, 1, 2, 3, 4]
    assert [c.index for c in _within_budget(span, span[4], 100)] == [4]


def test_expanding_returns_each_span_once_and_reports_the_hits_scores():
    record = FileRecord("f", "md", [chunk(i, f"Guide\nstep {i} " + "y" * 30) for i in range(6)])
    found = _Found(chunks={c.chunk_id: c for c in record.chunks}, records={"f": record})
    ranked = [fused(record.chunks[2], 0.9), fused(record.chunks[3], 0.8), fused(record.chunks[5], 0.7)]
    hits = _expand(found, ranked, request(top_k=5, context_window=1))
    assert [h.chunk.index for h in hits] == [2, 5]  # 3 was returned inside 2's window
    assert "step 1" in hits[0].content and "step 3" in hits[0].content
    assert (hits[0].score, hits[0].vector_score, hits[0].keyword_score, hits[0].format) == (0.9, 0.4, 0.7, "md")
    again = [ranked[0], fused(record.chunks[2], 0.85), *ranked[1:]]
    plain = _expand(found, again, request(top_k=5, context_window=0))
    assert [h.chunk.index for h in plain] == [2, 3, 5] and plain[0].content == record.chunks[2].text


def test_a_chunk_without_a_record_or_missing_from_its_record_is_returned_alone():
    record = FileRecord("f", "md", [chunk(i) for i in range(3)])
    stray = chunk(9, "adopted from the vector database", parent=0)  # its record lost or stale
    assert _neighbours(record, stray, 1) == [stray]
    found = _Found(chunks={stray.chunk_id: stray}, records={})
    (hit,) = _expand(found, [fused(stray)], request(top_k=5, context_window=1))
    assert hit.content == stray.text and hit.format == ""
    stale = FileRecord("f", "docx", [stray], parents=["the only parent"])
    found = _Found(chunks={stray.chunk_id: stray}, records={"f": stale})
    assert _expand(found, [fused(stray)], request(top_k=5))[0].content == "the only parent"
    gone = chunk(1, "part", parent=1)  # its parent index is past the record's parents
    found = _Found(chunks={gone.chunk_id: gone}, records={"f": stale})
    assert _expand(found, [fused(gone)], request(top_k=5))[0].content == "part"


def test_each_parent_passage_is_returned_once_with_its_heading():
    chunks = [chunk(i, f"part {i}", heading="Guide" if i < 4 else "", parent=i // 2) for i in range(6)]
    record = FileRecord("f", "docx", chunks, parents=["first parent text", "Guide: second parent", "third"])
    found = _Found(chunks={c.chunk_id: c for c in chunks}, records={"f": record})
    hits = _expand(found, [fused(c) for c in (chunks[0], chunks[1], chunks[3], chunks[5])], request(top_k=5))
    # the heading is added unless the passage already starts with it, and never an empty one
    assert [h.content for h in hits] == ["Guide\nfirst parent text", "Guide: second parent", "third"]


def test_joined_chunks_lose_their_repeated_heading_and_overlap():
    assert merge_texts([]) == ""
    joined = merge_texts(["Guide › Install\nUnpack the kettle. Fill it.", "Guide › Install\nFill it. Switch it on."])
    assert joined == "Guide › Install\nUnpack the kettle. Fill it. Switch it on."
    # an overlap of 8 characters is removed; 7 or fewer are a coincidence and kept
    assert merge_texts(["abc 12345678", "12345678 def"]) == "abc 12345678 def"
    assert merge_texts(["abc 1234567", "1234567 def"]) == "abc 1234567\n1234567 def"
    assert merge_texts(["short", "Other heading\nshort body"]) == "short\nOther heading\nshort body"
    three = merge_texts(["Guide\nStep one.\nStep two.", "Guide\nStep three.\nStep four."])
    assert three == "Guide\nStep one.\nStep two.\nStep three.\nStep four."


def test_copies_differing_only_in_case_and_spacing_are_collapsed():
    a, b, c = chunk(0, "Descaling takes  25 minutes."), chunk(1, "descaling TAKES 25\nminutes. "), chunk(2, "Other.")
    chunks = {x.chunk_id: x for x in (a, b, c)}
    assert [f.chunk_id for f in _drop_duplicates([fused(a), fused(b), fused(c)], chunks)] == [a.chunk_id, c.chunk_id]


class RerankHost:
    """Answers rerank calls with the given results, as LangBot passes on a provider's."""

    def __init__(self, results: list[dict] | Exception) -> None:
        self.results = results
        self.calls: list[tuple] = []

    async def invoke_rerank(self, model: str, query: str, documents: list[str], top_k: int | None = None) -> list[dict]:
        self.calls.append((model, query, documents, top_k))
        if isinstance(self.results, Exception):
            raise self.results
        return self.results


def rerank(host: RerankHost, chunks: list[ChunkRecord]) -> list[Fused]:
    ranked = [Fused(c.chunk_id, 0.5, 0.1 * (i + 1), 0.2 * (i + 1), 0.5) for i, c in enumerate(chunks)]
    req = RetrieveRequest("kb", "kb", "which fruit", CreationSettings("model"), RetrievalSettings(rerank_model_uuid="rr"), None)
    return asyncio.run(_rerank(host, {c.chunk_id: c for c in chunks}, req, ranked))


def test_rerank_orders_by_relevance_and_each_hit_keeps_its_vector_and_keyword_scores():
    chunks = [chunk(i, text) for i, text in enumerate(["Apples.", "Bananas.", "Cherries."])]
    host = RerankHost([{"index": 1, "relevance_score": 0.2}, {"index": 0, "relevance_score": 0.9},
                       {"index": 2, "relevance_score": 1.4}])
    out = rerank(host, chunks)
    assert [f.chunk_id for f in out] == ["f-2", "f-0", "f-1"]
    assert [f.score for f in out] == [1.0, 0.9, 0.2]  # clipped to 0-1
    assert [(f.vector_score, f.keyword_score) for f in out] == [(0.1 * 3, 0.2 * 3), (0.1, 0.2), (0.1 * 2, 0.2 * 2)]
    assert host.calls == [("rr", "which fruit", ["Apples.", "Bananas.", "Cherries."], 3)]


def test_rerank_results_for_documents_it_was_not_sent_are_ignored_and_a_failure_keeps_the_order():
    chunks = [chunk(i, text) for i, text in enumerate(["Apples.", "Bananas."])]
    out = rerank(RerankHost([{"index": 2, "relevance_score": 0.9}, {"index": -1, "relevance_score": 0.8},
                             {"index": 0, "relevance_score": 0.3}]), chunks)
    assert [f.chunk_id for f in out] == ["f-0"]
    assert [f.chunk_id for f in rerank(RerankHost(RuntimeError("provider down")), chunks)] == ["f-0", "f-1"]


async def test_a_restarted_plugin_reranks_what_it_reads_from_storage_and_keeps_a_hit_at_the_threshold(
        harness: Harness, host):
    await harness.ingest("kb-rerank", "a.txt", b"Apples are red or green.")
    await harness.ingest("kb-rerank", "b.txt", b"Bananas are yellow.")
    fresh = Harness(type(host)())  # a restarted process: no record in memory
    fresh.host.collections, fresh.host.storage, fresh.host.files = host.collections, host.storage, host.files
    fresh.host.rerank_fn = lambda query, docs: [0.9 if "Bananas" in d else 0.25 for d in docs]
    response = await fresh.retrieve("kb-rerank", "apples",
                                    settings={"rerank_model_uuid": "rr", "score_threshold": 0.25,
                                              "source_line": False})
    assert [(r.content[0].text.split()[0], r.score) for r in response.results] == [("Bananas", 0.9), ("Apples", 0.25)]
    assert all(r.metadata["format"] == "text" for r in response.results)  # from the records read


async def test_a_restarted_plugin_answers_from_the_records_it_reads_from_storage(harness: Harness, host):
    await harness.ingest("kb-restart", "a.txt", b"Apples are red or green.")
    await harness.ingest("kb-restart", "b.txt", b"Bananas are yellow.")
    fresh = Harness(type(host)())  # a restarted process: no record in memory
    fresh.host.collections, fresh.host.storage, fresh.host.files = host.collections, host.storage, host.files
    response = await fresh.retrieve("kb-restart", "apples", settings={"source_line": False})
    assert response.results and response.results[0].content[0].text.startswith("Apples")
    assert all(r.metadata["format"] == "text" for r in response.results)
