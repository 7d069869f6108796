"""Retrieve: candidates (vector and/or keyword) → relevance cut (a question no passage answers
gets no hits) → fusion → rerank → threshold → dedupe → parent / neighbour expansion → hits in
score order, each with a 0–1 score and a consistent distance (1 − score). The hits are what the
bot is told: an empty list when the cut found nothing that answers."""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field, replace
from typing import Any

from lucidrag.base.errors import EmbeddingFailure, VectorStoreFailure
from lucidrag.base.host import HostApi, describe, with_retries
from lucidrag.base.settings import CreationSettings, RetrievalSettings
from lucidrag.retrieval import fusion, relevance
from lucidrag.retrieval.fusion import (
    Candidate,
    Fused,
    by_coverage,
    diversify,
    fuse,
    single,
)
from lucidrag.retrieval.localfilter import LocalFilterHost, Selector
from lucidrag.retrieval.sources import with_source_line
from lucidrag.state.kbstate import KnowledgeBaseState
from lucidrag.state.records import ChunkRecord, FileRecord, is_chunk_vector, is_document_vector
from lucidrag.state.store import KbStore
from lucidrag.vectors.embedding import Embedder
from lucidrag.vectors.scoring import (
    calibrate,
    clip01,
    cosine,
    cosine_from_distance,
    guess_metric,
)

logger = logging.getLogger(__name__)

RERANK_CAP = 64  # the host's limit on documents per rerank call
CONTEXT_BUDGET = 2400  # characters per returned hit when neighbours are merged in
# Candidates each list brings to the hybrid fusion, whatever top_k is. A chunk missing from one
# list scores 0 there, so with short lists (the old top_k x 4, i.e. 20 at the default top_k 5) a
# passage 25th by vectors and 2nd by keywords lost its vector evidence, and asking for fewer
# results changed which ones came first. 100 per list: nDCG@10 +0.016 CISI, +0.001 DRCD/CMRC,
# -0.001 SciFact against 40; 150-300 gained on two sets and lost on SciFact (docs/BENCHMARKS.md).
FUSION_POOL = 100


@dataclass(frozen=True)
class Hit:
    chunk: ChunkRecord
    content: str
    score: float  # what is reported: never above the score of the hit before it (`in_score_order`)
    format: str
    # The passage's own evidence, for the console's "why this rank": its own score before the
    # order capped it (mean of cosine and coverage in hybrid mode, the rerank relevance with a
    # rerank model), its cosine and its keyword coverage (None: not a candidate of that search).
    fused_score: float | None = None
    vector_score: float | None = None
    keyword_score: float | None = None

    @property
    def distance(self) -> float:
        return 1.0 - self.score

    @property
    def document_name(self) -> str:
        # LangBot's Retrieve Test titles each card with document_name (else the file's UUID).
        return self.chunk.document_name or f"{(self.format or 'unknown').upper()} file"

    def metadata(self) -> dict[str, Any]:
        name = self.document_name
        meta: dict[str, Any] = {
            "file_id": self.chunk.file_id,
            "chunk_index": self.chunk.index,
            "heading": self.chunk.heading,
            "page": self.chunk.page if self.chunk.page is not None else 0,
            "format": self.format,
            # The content starts with the heading path; the source line adds only what it lacks.
            "citation": citation(self.format, self.chunk.page, self.chunk.document_name, self.chunk.heading),
            "document_name": name,
        }
        evidence = {"fused_score": self.fused_score, "vector_score": self.vector_score,
                    "keyword_score": self.keyword_score}
        meta.update({key: value for key, value in evidence.items() if value is not None})
        return meta


@dataclass(frozen=True)
class RetrieveRequest:
    kb_id: str
    collection_id: str
    query: str
    creation: CreationSettings
    settings: RetrievalSettings
    where: dict[str, Any] | None
    background: float | None = None  # the KB's probe background for this question (relevance.py), if known
    anchor: float | None = None  # and the anchor of its own passages (relevance.py), if known


@dataclass
class _Found:
    """What one retrieval learnt about its candidates: each chunk's file, the vector DB's results
    (their metadata carries the text), and -- for the head of the ranking only -- the chunks and
    their files' records, read on demand (`KnowledgeBaseState.file_records`)."""

    file_of: dict[str, str] = field(default_factory=dict)
    vector_hits: dict[str, dict[str, Any]] = field(default_factory=dict)
    chunks: dict[str, ChunkRecord] = field(default_factory=dict)
    records: dict[str, FileRecord] = field(default_factory=dict)

    async def resolve(self, host: HostApi, state: KnowledgeBaseState, collection_id: str,
                      ranked: list[Fused]) -> None:
        """Read what the candidates in `ranked` need; what an earlier call resolved is kept."""
        ranked = [f for f in ranked if f.chunk_id not in self.chunks]
        files = [self.file_of[f.chunk_id] for f in ranked
                 if f.chunk_id in self.file_of and self.file_of[f.chunk_id] not in self.records]
        unconfirmed: set[str] = set()  # (its hits are no answer either: the file may have failed)
        self.records.update(await state.file_records(host, collection_id, files, unconfirmed=unconfirmed))
        by_id: dict[str, dict[str, ChunkRecord]] = {}
        for fused in ranked:
            file_id = self.file_of.get(fused.chunk_id)
            record = self.records.get(file_id) if file_id else None
            chunk = None
            if record is not None:
                if file_id not in by_id:
                    by_id[file_id] = {c.chunk_id: c for c in record.chunks}
                chunk = by_id[file_id].get(fused.chunk_id)
            if chunk is None and fused.chunk_id in self.vector_hits and file_id not in unconfirmed:
                chunk = state.adopt_hit(self.vector_hits[fused.chunk_id])
            if chunk is not None:
                self.chunks[fused.chunk_id] = chunk


async def retrieve(host: HostApi, state: KnowledgeBaseState, embedder: Embedder,
                   request: RetrieveRequest) -> list[Hit]:
    settings = request.settings
    mode = settings.search_mode
    if mode == "keyword" and not state.loaded:
        logger.warning("kb=%s: the keyword index is still being read after a restart; this keyword query "
                       "is answered by vector search", request.kb_id)
        mode = "vector"
    if mode == "hybrid":
        pool = max(FUSION_POOL, settings.top_k * 4)
    else:
        pool = min(max(settings.top_k * 4, 20), 100)
    found = _Found()
    vector: list[Candidate] = []
    keyword: list[Candidate] = []
    # While the keyword index is still being read or built (a restart), hybrid search uses its
    # vector half alone: a partial keyword list would favour the indexed files.
    use_keyword = mode == "keyword" or (mode == "hybrid" and state.loaded and not state.indexing)
    selector = Selector(host, state, request.collection_id)  # a filter is evaluated once per query
    if mode in ("hybrid", "vector"):
        searcher = LocalFilterHost(host, selector) if request.where else host
        vector = await _vector_candidates(searcher, state, embedder, request, pool, found)
    if use_keyword:
        keyword = await _keyword_candidates(selector, state, request, pool, found)
    if settings.relevance_cut == "auto" and not await _answers(
            host, selector, state, embedder, request, None if mode == "keyword" else vector,
            keyword if use_keyword else None, found, pool):
        return []  # no passage answers the question: the bot is told nothing
    if mode == "hybrid" and use_keyword:
        ranked = diversify(fuse(vector, by_coverage(keyword), settings.vector_weight), found.file_of,
                            fusion.FILE_SUPPORT)
    else:
        ranked = diversify(single(vector or keyword, from_vector=mode != "keyword"), found.file_of)

    head = ranked[: max(settings.top_k * 4, RERANK_CAP if settings.rerank_model_uuid else 0, 20)]
    if settings.rerank_model_uuid:
        hits = await _reranked_hits(host, state, request, head, found)
    else:
        hits = await _hits(host, state, request, head, found)
    unsettled = state.unsettled  # a file may have stopped being an answer while this query ran (failed, deleted)
    return in_score_order([h for h in hits if h.chunk.file_id not in unsettled])


def in_score_order(hits: list[Hit]) -> list[Hit]:
    """Each hit reports at most the score of the hit before it, so the results are sorted by the
    score they report (a runner, or LangBot merging several knowledge bases, may sort by it). The
    order is the ranking's, which can put a passage below one whose own score is lower: the
    fusion ranks by normalised strengths, not by the reported mean, and one passage per file
    comes first. Such a passage's `score` shows that demotion; its own stays in `fused_score`.
    The threshold was applied to the own scores, so every reported score still meets it."""
    ordered: list[Hit] = []
    for hit in hits:
        if ordered and hit.score > ordered[-1].score:
            hit = replace(hit, score=ordered[-1].score)
        ordered.append(hit)
    return ordered


async def _reranked_hits(host: HostApi, state: KnowledgeBaseState, request: RetrieveRequest,
                         head: list[Fused], found: _Found) -> list[Hit]:
    """The rerank model sees the whole head (up to RERANK_CAP), so every record of it is read."""
    await found.resolve(host, state, request.collection_id, head)
    ranked = _drop_duplicates([f for f in head if f.chunk_id in found.chunks], found.chunks)
    if ranked:
        ranked = await _rerank(host, found.chunks, request, ranked)
    return _expand(found, [f for f in ranked if f.score >= request.settings.score_threshold], request)


async def _hits(host: HostApi, state: KnowledgeBaseState, request: RetrieveRequest,
                head: list[Fused], found: _Found) -> list[Hit]:
    """Records are read for the first 2 x top_k candidates, and for the rest of the head only if
    duplicates, the threshold or overlapping windows leave fewer than top_k hits. Every step keeps
    the order and only looks back, so the hits are those the whole head would give, for about half
    the plugin-storage reads on a KB whose records are not all cached."""
    settings = request.settings
    hits: list[Hit] = []
    for end in (max(settings.top_k * 2, 10), len(head)):
        prefix = head[:end]
        await found.resolve(host, state, request.collection_id, prefix)
        kept = _drop_duplicates([f for f in prefix if f.chunk_id in found.chunks], found.chunks)
        hits = _expand(found, [f for f in kept if f.score >= settings.score_threshold], request)
        if len(hits) >= settings.top_k or end >= len(head):
            break
    return hits


async def _answers(host: HostApi, selector: Selector, state: KnowledgeBaseState, embedder: Embedder,
                   request: RetrieveRequest, vector: list[Candidate] | None, keyword: list[Candidate] | None,
                   found: _Found, pool: int) -> bool:
    """The relevance cut (retrieval/relevance.py) on the candidates found (None: that search was
    not run). Vector mode asks the keyword index too, for the question's words (its best
    relevance.DEPTH chunks: CPU only, no host call), unless it is still being read; keyword mode
    asks the vector search (one embedding call and one search, as vector mode's)."""
    if keyword is None and state.loaded and not state.indexing:
        keyword = await _keyword_candidates(selector, state, request, relevance.DEPTH, found)
    keyword_mode = vector is None
    if vector is None:
        vector = await _vector_evidence(host, selector, state, embedder, request, pool, found)
    best = max(vector, key=lambda c: c.score, default=None)
    if best is not None and found.file_of.get(best.chunk_id) not in state.index:
        keyword = None  # the best passage's file is not indexed (e.g. adopted from its vectors): no word evidence
    verdict = relevance.judge(relevance.gather(vector, keyword), keyword_mode, request.background,
                              anchor=request.anchor)
    if not verdict.answers:
        logger.debug("kb=%s: no passage answers the question (stands out %s, coverage %s)", request.kb_id,
                     verdict.stand_out, verdict.coverage)
    return verdict.answers


async def _vector_evidence(host: HostApi, selector: Selector, state: KnowledgeBaseState, embedder: Embedder,
                           request: RetrieveRequest, pool: int, found: _Found) -> list[Candidate]:
    """Keyword mode's vector candidates, for the relevance cut only; where the embedding model or
    the vector database fails, none (the question is then judged by its words alone)."""
    searcher = LocalFilterHost(host, selector) if request.where else host
    try:
        return await _vector_candidates(searcher, state, embedder, request, pool, found)
    except (EmbeddingFailure, VectorStoreFailure) as error:
        logger.warning("kb=%s: the relevance cut could not ask the vector search (%s); the question is judged by "
                       "its words alone", request.kb_id, error)
        return []


async def _vector_candidates(host: HostApi, state: KnowledgeBaseState, embedder: Embedder,
                             request: RetrieveRequest, pool: int, found: _Found) -> list[Candidate]:
    query_vector = await embedder.embed_query(request.creation.embedding_model_uuid, request.query)
    # room for the files' document vectors beside `pool` passages (at least relevance.DEPTH of
    # them, the relevance cut's background, even at vector mode's smallest pool)
    size = max(pool + pool // 2, 2 * relevance.DEPTH)
    try:
        results = await with_retries(lambda: host.vector_search(
            request.collection_id, query_vector, top_k=size, filters=request.where))
    except Exception as error:  # noqa: BLE001
        raise VectorStoreFailure(f"The vector database search failed: {describe(error)}") from error
    unsettled = state.unsettled  # vectors of ingests that have not committed are not answers yet
    results = [r for r in results if r.get("id") is not None
               and (r.get("metadata") or {}).get("file_id") is not None
               and str(r["metadata"]["file_id"]) not in unsettled]
    passages: list[dict[str, Any]] = []
    document_hits: list[dict[str, Any]] = []
    for r in results:  # a document vector (or a probe left for `reconcile`) is never a passage
        if is_chunk_vector(r["id"], r["metadata"]):
            passages.append(r)
        elif is_document_vector(r["id"], r["metadata"]):
            document_hits.append(r)
    results = passages[:pool]
    for r in results:
        found.file_of[str(r["id"])] = str(r["metadata"]["file_id"])
        found.vector_hits[str(r["id"])] = r
    if state.metric is None and results:
        await _calibrate_from_query(host, state, embedder, request, query_vector, results[0])
    metric = state.metric or guess_metric([float(r.get("distance", 0.0)) for r in results + document_hits])

    def score(r: dict[str, Any]) -> float:
        return clip01(cosine_from_distance(float(r.get("distance", 0.0)), metric))

    candidates = [Candidate(str(r["id"]), score(r)) for r in results]
    candidates.sort(key=lambda c: c.score, reverse=True)
    documents = fusion.document_scores(candidates, {str(r["metadata"]["file_id"]): score(r) for r in document_hits},
                                       found.file_of, lambda f: f in state.index and state.index.chunk_count(f) == 1)
    return fusion.with_document_view(candidates, documents, found.file_of)


async def _keyword_candidates(selector: Selector, state: KnowledgeBaseState, request: RetrieveRequest,
                              pool: int, found: _Found) -> list[Candidate]:
    """BM25 ranks (and is the fusion strength); the reported score is the query-term coverage (0-1).
    A filter restricts the search itself (never a cut of the unfiltered ranking), so every
    matching chunk can be found."""
    file_ids: set[str] | None = None
    chunk_ids: set[str] | None = None
    top_k = pool
    if request.where:
        selection = await selector.select(request.where)
        file_ids, chunk_ids = selection.file_ids, selection.chunk_ids
        if chunk_ids is not None:
            top_k = max(pool, selection.vector_count)  # every chunk of those files may be needed
    hits = await state.keyword_search(request.query, top_k, file_ids)
    unsettled = state.unsettled
    out: list[Candidate] = []
    for hit in hits:
        if hit.file_id in unsettled or (chunk_ids is not None and hit.chunk_id not in chunk_ids):
            continue
        found.file_of.setdefault(hit.chunk_id, hit.file_id)
        out.append(Candidate(hit.chunk_id, clip01(hit.coverage), strength=hit.score, body=hit.body_coverage))
        if len(out) >= pool:
            break
    return out


async def _calibrate_from_query(host: HostApi, state: KnowledgeBaseState, embedder: Embedder,
                                request: RetrieveRequest, query_vector: list[float],
                                top: dict[str, Any]) -> None:
    """No stored metric (e.g. plugin storage lost): embed the top hit's text once and compare."""
    text = (top.get("metadata") or {}).get("text") or top.get("document")
    if not text:
        return
    try:
        vector = await embedder.embed(request.kb_id, request.creation.embedding_model_uuid, [str(text)])
    except EmbeddingFailure:
        return
    metric = calibrate([(float(top.get("distance", 0.0)), cosine(query_vector, vector[0]))])
    if metric is not None:
        await state.set_metric(KbStore(host, request.kb_id), metric)


def _drop_duplicates(ranked: list[Fused], chunks: dict[str, ChunkRecord]) -> list[Fused]:
    """Collapse chunks with the same normalised text (the same file uploaded twice)."""
    seen: set[str] = set()
    out: list[Fused] = []
    for fused in ranked:
        fingerprint = hashlib.sha1(_normalise(chunks[fused.chunk_id].text).encode()).hexdigest()
        if fingerprint not in seen:
            seen.add(fingerprint)
            out.append(fused)
    return out


async def _rerank(host: HostApi, chunks: dict[str, ChunkRecord], request: RetrieveRequest,
                  ranked: list[Fused]) -> list[Fused]:
    head = ranked[:RERANK_CAP]
    documents = [chunks[f.chunk_id].text for f in head]
    try:
        results = await host.invoke_rerank(request.settings.rerank_model_uuid, request.query, documents,
                                           top_k=len(documents))
        order = [(int(r["index"]), float(r["relevance_score"])) for r in results]
    except Exception as error:  # noqa: BLE001 - a failed rerank never fails the query
        logger.warning("kb=%s: rerank failed, using the fused order (%s)", request.kb_id, describe(error))
        return ranked
    reranked = [
        Fused(head[i].chunk_id, clip01(score), head[i].vector_score, head[i].keyword_score, score)
        for i, score in sorted(order, key=lambda p: p[1], reverse=True)
        if 0 <= i < len(head)
    ]
    return reranked


def _expand(found: _Found, ranked: list[Fused], request: RetrieveRequest) -> list[Hit]:
    """Parent passages or neighbour windows; each text span is returned at most once."""
    top_k = request.settings.top_k
    window = request.settings.context_window
    hits: list[Hit] = []
    used: set[tuple[str, Any]] = set()
    for fused in ranked:
        if len(hits) >= top_k:
            break
        chunk = found.chunks[fused.chunk_id]
        record = found.records.get(chunk.file_id)
        file_format = record.format if record else ""
        parent = _parent_text(record, chunk)
        heading = chunk.heading  # the heading path the content starts with
        if parent is not None:
            key: tuple[str, Any] = (chunk.file_id, ("parent", chunk.parent))
            if key in used:
                continue
            used.add(key)
            content = _with_heading(chunk.heading, parent)
        elif window > 0:
            span = [c for c in _neighbours(record, chunk, window) if (c.file_id, c.index) not in used]
            if not any(c.index == chunk.index for c in span):
                continue
            span = _within_budget(span, chunk, CONTEXT_BUDGET)
            used.update((c.file_id, c.index) for c in span)
            content = merge_texts([c.text for c in span])
            heading = span[0].heading
        else:
            if (chunk.file_id, chunk.index) in used:
                continue
            used.add((chunk.file_id, chunk.index))
            content = chunk.text
        if request.settings.source_line:
            content = with_source_line(content, chunk.document_name, heading, chunk.page)
        score = round(fused.score, 6)
        hits.append(Hit(chunk, content, score, file_format, score, fused.vector_score, fused.keyword_score))
    return hits


def _neighbours(record: FileRecord | None, chunk: ChunkRecord, window: int) -> list[ChunkRecord]:
    """The chunk and up to `window` chunks either side of it in the same file, in order."""
    if record is None:
        return [chunk]
    position = next((i for i, c in enumerate(record.chunks) if c.index == chunk.index), None)
    if position is None:
        return [chunk]
    return record.chunks[max(0, position - window) : position + window + 1]


def _parent_text(record: FileRecord | None, chunk: ChunkRecord) -> str | None:
    if record is None or chunk.parent is None or chunk.parent >= len(record.parents):
        return None
    return record.parents[chunk.parent]


def _within_budget(span: list[ChunkRecord], centre: ChunkRecord, budget: int) -> list[ChunkRecord]:
    """Keep the centre chunk and grow outwards while the merged text fits the budget."""
    position = next(i for i, c in enumerate(span) if c.index == centre.index)
    lo = hi = position
    total = len(span[position].text)
    while True:
        grew = False
        for candidate in (hi + 1, lo - 1):
            if 0 <= candidate < len(span) and total + len(span[candidate].text) <= budget:
                total += len(span[candidate].text)
                lo, hi = min(lo, candidate), max(hi, candidate)
                grew = True
        if not grew:
            return span[lo : hi + 1]


def merge_texts(texts: list[str]) -> str:
    """Join consecutive chunks, removing the overlap each repeats from the one before it and a
    repeated heading line."""
    if not texts:
        return ""
    merged = texts[0]
    for text in texts[1:]:
        heading, _, body = text.partition("\n")
        if body and merged.startswith(heading + "\n"):
            text = body  # same heading path as the first chunk: don't repeat it
        overlap = _overlap(merged, text)
        merged = merged + ("" if overlap else "\n") + text[overlap:]
    return merged


def _overlap(left: str, right: str, limit: int = 1000) -> int:
    for size in range(min(len(left), len(right), limit), 7, -1):
        if left.endswith(right[:size]):
            return size
    return 0


def _with_heading(heading: str, text: str) -> str:
    return f"{heading}\n{text}" if heading and not text.startswith(heading) else text


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def citation(file_format: str, page: int | None, document_name: str = "", heading: str = "") -> str:
    """The source line of a passage, without what its content already says: the document's name
    (unless its heading path, the content's first line, starts with it), format and page."""
    parts = []
    if document_name and not heading.startswith(document_name):
        parts.append(document_name)
    if file_format:
        parts.append(file_format.upper())
    if page:
        parts.append(f"p. {page}")
    return " · ".join(parts)
