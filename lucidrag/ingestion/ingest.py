"""Ingest: bytes → Document → chunks → batched embed → batched upsert → FileRecord.

`ingest_file` decides the file's outcome, once: it returns only for a committed file, and
raises a `LucidRagError` with a user-facing message (the component maps it to FAILED) otherwise.
If anything fails after vectors were written, the file's vectors are deleted before raising, so a
failed file leaves no orphans (or, if that delete fails, it stays no answer until reconciliation
removes them). Its time has three deadlines (budget.IngestDeadlines): work, commit, rollback.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from lucidrag.base.blocking import run_blocking, upload_work
from lucidrag.base.budget import BudgetSpent, IngestDeadlines, budget, remaining, until
from lucidrag.base.errors import (
    IngestTimedOut,
    KnowledgeBaseDeleted,
    LucidRagError,
    ParseError,
    PluginStorageFailure,
    VectorStoreFailure,
)
from lucidrag.base.host import HostApi, describe, is_kb_gone, with_retries
from lucidrag.base.writegate import GateClosed
from lucidrag.base.settings import CreationSettings
from lucidrag.index.probes import opening_question
from lucidrag.ingestion.chunking import ChunkedDocument, with_title_line
from lucidrag.ingestion.document import Document, document_name, document_title
from lucidrag.ingestion.isolation import chunk_upload, parse_upload
from lucidrag.ingestion.vision import describe_pictures
from lucidrag.state.failures import upload_key
from lucidrag.state.kbstate import KnowledgeBaseState
from lucidrag.state.latewrites import LostAnswers, answer_lost, delete_file_vectors, send, send_delete
from lucidrag.state.records import ChunkRecord, FileRecord, chunk_uuid, document_vector_id, document_vector_metadata
from lucidrag.state.store import KbStore
from lucidrag.vectors.embedding import Embedder
from lucidrag.vectors.scoring import calibrate
from lucidrag.vectors.vectorscan import holds_file

logger = logging.getLogger(__name__)

UPSERT_BATCH = 100
REMOVAL_ATTEMPTS = 3  # deletes of a failed upload's earlier version where storage refused to note it
# A file of two chunks or more also gets a document vector: its name and opening, this many
# characters (most embedding models read 256-512 tokens of it), so that retrieval can weigh what the
# whole file is about beside each passage (retrieval/fusion.py, DOCUMENT_WEIGHT).
DOCUMENT_VECTOR_CHARS = 2000


@dataclass(frozen=True)
class IngestRequest:
    kb_id: str
    collection_id: str
    document_id: str
    storage_path: str
    filename: str
    mime_type: str
    settings: CreationSettings
    parsed: Document | None = None  # from an external Parser plugin, if the user chose one


@dataclass(frozen=True)
class IngestOutcome:
    chunks: int
    format: str



def file_record(file_id: str, file_format: str, chunked: ChunkedDocument, name: str = "",
                ocr: dict[str, str | int] | None = None, upload_key: str = "") -> FileRecord:
    """The FileRecord of a chunked document: what the vectors carry and plugin storage keeps."""
    chunks = [
        ChunkRecord(chunk_id=chunk_uuid(file_id, c.index), file_id=file_id, index=c.index, text=c.embed_text,
                    heading=c.heading, page=c.page, parent=c.parent, document_name=name)
        for c in chunked.chunks
    ]
    return FileRecord(file_id=file_id, format=file_format, chunks=chunks, parents=list(chunked.parents), name=name,
                      ocr=dict(ocr or {}), upload_key=upload_key)


def upsert_order(chunks: int) -> list[int]:
    """The first chunk index of each upsert batch, in the order they are written: the batch with
    chunk 0 goes last, so a file whose chunk-0 vector is stored has all of its vectors (its
    completion mark in the vector DB, `KnowledgeBaseState._record_from_vectors`)."""
    starts = list(range(0, chunks, UPSERT_BATCH))
    return starts[1:] + starts[:1]


async def ingest_file(host: HostApi, state: KnowledgeBaseState, embedder: Embedder, request: IngestRequest,
                      deadlines: IngestDeadlines, ready: Callable[[], Awaitable[None]],
                      probes: Sequence[str] = (), opening: bool = False,
                      committed: Callable[[np.ndarray, np.ndarray | None, np.ndarray | None], None] | None = None
                      ) -> IngestOutcome:
    """Ingest one file; the one place that decides its outcome. Returns only once the file is
    committed (durable: a restart knows it); otherwise raises a `LucidRagError` after removing
    what it wrote (or leaving that to reconciliation, with the file no answer meanwhile). The work
    -- `ready` (the KB's state loaded), parsing, embedding, writing vectors -- stops at
    `deadlines.work`; the commit is never cut off half way: its host calls and its wait for the
    KB's lock end at `deadlines.commit`, and a rollback's at `deadlines.rollback`. `probes` and, with
    `opening`, the file's opening question (index/probes.opening_question) are embedded in the
    chunks' batches (no call of their own); once the file is committed, `committed` is given the
    chunks' vectors and theirs (None: not asked) -- bookkeeping, no host call: it must not raise,
    and the commit stays the ingest's last host call."""
    store = KbStore(host, request.kb_id)
    begun = False
    dim: int | None = None
    try:
        with until(deadlines.work):
            await ready()
            async with asyncio.timeout(deadlines.work - time.monotonic()):  # kills a parse worker too
                # the file's own steps, before it touches the KB; the KB's deletion stops them
                with upload_work(), state.writes.stopped_when_closed():
                    record, vectors, document_vector, asked = await _prepare(host, embedder, request, probes, opening)
            dim = int(vectors.shape[1])
            # Replace an earlier version of this document (re-ingest; Milvus inserts, it does not
            # upsert), then write the new vectors.
            replaces = await _replaces_earlier_version(host, state, store, request, dim, deadlines)
            async with state.writes.write():
                begun = True
                if not await state.begin_ingest(store, request.document_id, len(record.chunks), dim):
                    begun = False
                    raise PluginStorageFailure(
                        "LangBot's plugin storage failed before the file was stored, so LucidRAG could not "
                        "keep track of it. Nothing was kept; upload the file again."
                    )
            await _after_late_calls(state, request, deadlines)
            if replaces:  # after the journal entry: a restart removes the earlier record if this is cut short
                await _delete_previous_version(host, state, request)
            mark = await _write_vectors(host, state, store, request, record, vectors, document_vector)
    except BaseException as error:
        timed_out = time.monotonic() >= deadlines.work
        if begun:
            await _abandon(host, state, store, request, deadlines, dim)
        elif isinstance(error, Exception) and not isinstance(error, (GateClosed, KnowledgeBaseDeleted)):
            await _forget_previous_version(host, state, embedder, store, request, deadlines, dim)
        failure = _failure(error, state, deadlines, timed_out, vectors_written=begun)
        if failure is error:
            raise
        raise failure from error

    failure, record_sent = await _commit(state, store, record, deadlines, mark)
    if failure is not None:
        # (`dim`: a KB still without a vector, its collection maybe missing, if chunk 0 was all)
        await _abandon(host, state, store, request, deadlines, dim, record_sent=record_sent)
        raise failure
    logger.info("kb=%s doc=%s: ingested %d chunks (%s, %d embedding calls so far)", request.kb_id,
                request.document_id, len(record.chunks), record.format, embedder.calls)
    if committed is not None:
        committed(vectors, asked[: len(probes)] if probes else None, asked[len(probes)] if opening else None)
    return IngestOutcome(len(record.chunks), record.format)


@dataclass(frozen=True)
class DocumentVector:
    """A file's document vector: its title and opening (`document_opening`), embedded."""
    text: str
    vector: np.ndarray


async def _prepare(host: HostApi, embedder: Embedder, request: IngestRequest, probes: Sequence[str],
                   opening: bool) -> tuple[FileRecord, np.ndarray, DocumentVector | None, np.ndarray]:
    """The file's record, its chunks' vectors, its document vector and the vectors of the `probes`
    and (with `opening`) of its opening question, in that order (nothing is written yet)."""
    document = request.parsed or await _read_and_parse(host, request)
    document = await describe_pictures(host, document, request.settings.vision_model_uuid)
    chunked = await chunk_upload(document, request.settings, request.kb_id)
    if not chunked.chunks:
        raise ParseError(
            "No text could be extracted from this file, not even by OCR from its pictures. Check "
            "that the file opens correctly; for pictures without text (charts, photos) choose a "
            "vision model when creating the knowledge base."
        )
    titled = with_title_line(document, request.settings.chunk_size)  # a .txt's title line is its title
    name = document_name(titled, datetime.fromtimestamp(time.time(), timezone.utc))
    record = await run_blocking(file_record, request.document_id, document.format, chunked, name,
                                {k: v for k, v in document.metadata.items() if k.startswith(("ocr_", "vision_"))},
                                upload_key(request.filename))
    texts = [c.text for c in record.chunks]
    document_text = document_opening(document, document_title(titled)) if len(texts) > 1 else None
    own = texts + ([document_text] if document_text else [])
    # the text under the title: a title alone names a file, it does not ask what it answers
    body = next((s.text for s in titled.sections if s.text.strip()), "") or texts[0]
    asked = [opening_question(body)] if opening else []  # cached like the chunks: a re-upload embeds nothing
    vectors = await embedder.embed(request.kb_id, request.settings.embedding_model_uuid, own + asked, probes)
    return (record, vectors[: len(texts)],
            (DocumentVector(document_text, vectors[len(texts)]) if document_text else None),
            np.concatenate([vectors[len(own) + len(asked) :], vectors[len(own) : len(own) + len(asked)]]))


def document_opening(document: Document, title: str) -> str:
    """What the document vector embeds: the document's own title (unless its text starts with it;
    an untitled file's generated name would only add noise) and the start of its text."""
    text = document.text
    if title and not text.lstrip().startswith(title):
        text = f"{title}\n{text}"
    return text[:DOCUMENT_VECTOR_CHARS]


async def _write_vectors(host: HostApi, state: KnowledgeBaseState, store: KbStore, request: IngestRequest,
                         record: FileRecord, vectors: np.ndarray,
                         opening: DocumentVector | None) -> Callable[[], Awaitable[bool]] | None:
    """Write the file's vectors, chunk 0's last (its completion mark). A file that only plugin
    storage's emptiness names (no journal entry: storage refused it) keeps chunk 0's vector back:
    until its commit is decided nothing durable could say it failed, and a restart adopts a file
    whose chunk-0 vector is stored. Returns what writes it then (`commit_ingest`), or None."""
    held_back = state.files.facts(request.document_id).unjournalled is not None
    # the document vector rides with the last batch (chunk 0's in a file under UPSERT_BATCH
    # chunks) when it has room, else it is written alone first
    tail = (len(record.chunks) - 1) // UPSERT_BATCH * UPSERT_BATCH
    carrier = tail if opening is not None and len(record.chunks) - tail < UPSERT_BATCH else None
    writes: list[int | None] = list(upsert_order(len(record.chunks)))
    if opening is not None and carrier is None:
        writes.insert(0, None)
    wrote = False
    for start in writes:
        first = (start or 0) + (1 if held_back and start == 0 else 0)
        batch = record.chunks[first : (start or 0) + UPSERT_BATCH] if start is not None else []
        if not batch and not (opening is not None and start == carrier):
            continue  # (chunk 0 alone, held back)

        def upsert(b: list[ChunkRecord] = batch, s: int | None = start, row: int = first) -> Awaitable[None]:
            ids, metadata = [c.chunk_id for c in b], [c.metadata(record.format) for c in b]
            rows, documents = vectors[row : row + len(b)].tolist(), [c.text for c in b]  # lists only for the call
            if opening is not None and s == carrier:
                ids.append(document_vector_id(request.document_id))
                metadata.append(document_vector_metadata(request.document_id, opening.text, record.name,
                                                         record.format))
                rows.append(opening.vector.tolist())
                documents.append(opening.text)
            return with_retries(lambda: send(state.files, record.file_id, int(vectors.shape[1]), lambda: host.vector_upsert(
                collection_id=request.collection_id, vectors=rows, ids=ids, metadata=metadata,
                documents=documents)))
        async with state.writes.write():
            await _first_or_later_write(state, store, upsert, first=not wrote)
        wrote = True
    if state.metric is None and wrote:
        async with state.writes.write():
            await _calibrate(host, state, store, request, record, vectors)
    return _completion_mark(host, state, store, request, record, vectors) if held_back else None


async def _first_or_later_write(state: KnowledgeBaseState, store: KbStore, upsert: Callable[[], Awaitable[None]],
                                first: bool) -> None:
    if first and state.metric is None:
        # The first write may create the collection; concurrent creators race on some backends
        # (Milvus Lite: "File exists"), so the first batches go one at a time.
        async with state.first_write:
            await upsert()
    else:
        await upsert()
    if first:
        await state.first_vectors_written(store)


def _completion_mark(host: HostApi, state: KnowledgeBaseState, store: KbStore, request: IngestRequest,
                     record: FileRecord, vectors: np.ndarray) -> Callable[[], Awaitable[bool]]:
    """What writes a held-back chunk-0 vector (`_write_vectors`): whether it is stored. A write
    whose answer was lost is looked for once (not in a collection that may not exist)."""
    chunk = record.chunks[0]
    dim = int(vectors.shape[1])
    lost = LostAnswers()  # an attempt of this write whose answer was lost

    def upsert() -> Awaitable[None]:
        return with_retries(lambda: send(lost, record.file_id, dim, lambda: host.vector_upsert(
            collection_id=request.collection_id, vectors=[vectors[0].tolist()], ids=[chunk.chunk_id],
            metadata=[chunk.metadata(record.format)], documents=[chunk.text])))

    async def write() -> bool:
        try:
            await _first_or_later_write(state, store, upsert, first=state.fresh)
            return True
        except Exception as error:  # noqa: BLE001 - the commit fails (the caller rolls back)
            # LangBot does a write whose answer was lost (it never cancels a call the plugin gave
            # up on): the file will be complete, so it commits (a restart waits for such writes
            # before it judges a file incomplete); only a write refused every time did nothing
            return lost.lost or answer_lost(error)
        finally:
            if lost.lost:
                state.files.unanswered(record.file_id, dim)
    return write


async def _commit(state: KnowledgeBaseState, store: KbStore, record: FileRecord, deadlines: IngestDeadlines,
                  mark: Callable[[], Awaitable[bool]] | None = None) -> tuple[Exception | None, bool]:
    """None once the file is committed; else why not (the file is still INGESTING: the caller
    rolls it back), and whether the record's save was sent (it may have landed, or land later).
    After an unexpected error, the file's state tells whether it got that far."""
    try:
        with until(deadlines.commit):
            async with state.writes.write():
                if await state.commit_ingest(store, record, mark):
                    return None, True
        return PluginStorageFailure(
            "LangBot's plugin storage failed while the file was saved, so it would be lost at the next "
            "restart. Nothing was kept; upload the file again."
        ), True
    except GateClosed:
        return _kb_deleted(), False
    except BudgetSpent:  # the KB's lock was not free in time: nothing was sent
        return PluginStorageFailure(
            "Another change of this knowledge base did not finish in time, so the file could not be "
            "saved. Nothing was kept; upload the file again."
        ), False
    except Exception as error:  # noqa: BLE001 - a bug; the state tells whether the file is committed
        logger.exception("kb=%s doc=%s: unexpected error while committing", store.kb_id, record.file_id)
        return (None if record.file_id not in state.in_flight else error), True


async def _forget_previous_version(host: HostApi, state: KnowledgeBaseState, embedder: Embedder, store: KbStore,
                                   request: IngestRequest, deadlines: IngestDeadlines, dim: int | None) -> None:
    """An upload of a document id failed before writing anything: LangBot shows the file as
    failed, so an earlier version of it (the same id uploaded before, or maybe: this process
    cannot tell) is no answer any more either. Its vectors go even where plugin storage refuses
    to note it: a record that outlives them is no answer after a restart either (FileReads),
    while nothing else would tell that process this upload failed. Best effort within
    `deadlines.rollback`; a failure leaves it to a later delete."""
    if state.writes.closed or not state.may_have_committed(request.document_id):
        return
    with until(deadlines.rollback):
        remove: Callable[[], Awaitable[object]] | None = None
        try:
            remove = await _version_remover(host, state, embedder, request, dim)
            if (await state.delete_file(store, request.document_id, remove)).durable:
                return
            reason = "plugin storage refused it"
        except Exception as error:  # noqa: BLE001 - logged for the operator (the vectors are tried again below)
            reason = describe(error)
        logger.warning("kb=%s doc=%s: the earlier version of a failed upload could not be removed now (%s); "
                       "it is no answer and is removed later", request.kb_id, request.document_id, reason)
        await state.abort_ingest(store, request.document_id, vectors_removed=False)  # `reconcile` removes it
        # Storage refused: the vectors go now all the same, as this may be the last chance (a
        # restart knows nothing of this failure); if they cannot, the vector DB itself is told.
        if remove is not None:
            await _removed_or_marked(remove, _tombstone_writer(host, state, embedder, request, dim), request)


def _tombstone_writer(host: HostApi, state: KnowledgeBaseState, embedder: Embedder, request: IngestRequest,
                      dim: int | None) -> Callable[[], Awaitable[object]]:
    """What writes the file's tombstone (`write_tombstone`; the model's dimension is learnt from
    one embedding if the upload got no further)."""
    async def write() -> None:
        known = dim
        if known is None:
            known = int((await embedder.embed(request.kb_id, request.settings.embedding_model_uuid,
                                              [request.document_id])).shape[1])
        await state.write_tombstone(host, request.collection_id, request.document_id, known)
    return write


async def _removed_or_marked(remove: Callable[[], Awaitable[object]], mark: Callable[[], Awaitable[object]],
                             request: IngestRequest) -> None:
    """`remove` the earlier version's vectors or, if the vector DB refuses, `mark` the file with its
    tombstone, which makes a restart remove them (nothing in plugin storage says the upload
    failed); tried REMOVAL_ATTEMPTS times within the rollback's time."""
    failure = ""
    for _ in range(REMOVAL_ATTEMPTS):
        for step in (remove, mark):
            try:
                await step()
                return
            except Exception as error:  # noqa: BLE001 - `reconcile` tries again while this process lives
                failure = describe(error)
        if remaining() <= 0:
            break
    logger.warning("kb=%s doc=%s: the earlier version's vectors could neither be removed nor marked now (%s); it "
                   "may be answered again after a restart until the file is deleted",
                   request.kb_id, request.document_id, failure)


async def _version_remover(host: HostApi, state: KnowledgeBaseState, embedder: Embedder, request: IngestRequest,
                           dim: int | None) -> Callable[[], Awaitable[object]]:
    """What deletes every vector of the document: a delete by file id, or -- while the KB's
    collection may not exist (a delete would make Milvus create it with dimension 1536) -- a
    vector of the model's dimension written first (`remove_first_write`; the dimension is learnt
    from one embedding if the upload got no further)."""
    if not state.fresh:
        return lambda: delete_file_vectors(host, state.files, request.collection_id, [request.document_id])
    if dim is None:
        probe = await embedder.embed(request.kb_id, request.settings.embedding_model_uuid, [request.document_id])
        dim = int(probe.shape[1])
    known = dim
    return lambda: state.remove_first_write(host, request.collection_id, request.document_id, known)


async def _abandon(host: HostApi, state: KnowledgeBaseState, store: KbStore, request: IngestRequest,
                   deadlines: IngestDeadlines, dim: int | None = None, record_sent: bool = False) -> None:
    """Remove what this ingest wrote, by `deadlines.rollback`: its vectors in the first half of the
    time left, so that the journal entry's rewrite fits if they stay (`abort_ingest`). A KB being
    deleted gets no key written for it (its deletion removes what is stored)."""
    with until(deadlines.rollback):
        with budget(remaining() / 2):
            # On a KB that never had a vector the first upsert failed, but may have written (its
            # answer lost): whether the collection exists is unknown, and a delete could create it
            # with the wrong dimension (Milvus). `remove_first_write` re-creates it first.
            if state.fresh and dim is not None:
                removed = await _remove_first_write(host, state, request, dim)
            else:
                removed = await _rollback(host, state, request)
        if not state.writes.closed:
            await state.abort_ingest(store, request.document_id, removed, dim, record_sent=record_sent)


def _failure(error: BaseException, state: KnowledgeBaseState, deadlines: IngestDeadlines, timed_out: bool,
             vectors_written: bool) -> BaseException:
    """What the operator is told about an ingest that stopped with `error`."""
    if not isinstance(error, Exception) or isinstance(error, KnowledgeBaseDeleted):
        return error
    if isinstance(error, GateClosed) or state.writes.closed:
        return _kb_deleted()
    if timed_out:
        return IngestTimedOut(f"Processing took longer than {int(deadlines.work_s)} s and was stopped. Split "
                              "the file into smaller files and upload them separately.")
    if isinstance(error, LucidRagError) or not vectors_written:
        return error
    return _refused(error)


def _refused(error: Exception) -> VectorStoreFailure:
    return VectorStoreFailure(
        f"The vector database refused the data: {describe(error)}. Nothing was kept; check the "
        "vector database in LangBot's settings and upload the file again."
    )


def _kb_deleted() -> KnowledgeBaseDeleted:
    return KnowledgeBaseDeleted("The knowledge base was deleted while this file was being processed; "
                                "nothing of the file was kept.")


async def _read_and_parse(host: HostApi, request: IngestRequest) -> Document:
    try:
        data = await with_retries(lambda: host.get_knowledge_file_stream(request.storage_path))
    except Exception as error:  # noqa: BLE001
        raise ParseError(
            f"LangBot could not hand over the uploaded file ({describe(error)}). Upload it again."
        ) from error
    return await parse_upload(data, request.filename, request.mime_type, request.kb_id)


async def _calibrate(host: HostApi, state: KnowledgeBaseState, store: KbStore, request: IngestRequest,
                     record: FileRecord, vectors: np.ndarray) -> None:
    """Learn how this backend reports distance, from vectors we just stored (one search).
    Best effort: without it, scores fall back to `guess_metric`."""
    probe = vectors[len(vectors) // 2]
    try:
        hits = await host.vector_search(request.collection_id, probe.tolist(), top_k=min(8, len(vectors)),
                                        filters={"file_id": request.document_id})
    except Exception as error:  # noqa: BLE001
        logger.warning("kb=%s: distance calibration search failed (%s)", request.kb_id, describe(error))
        return
    row = {c.chunk_id: i for i, c in enumerate(record.chunks)}
    pairs = [(float(h["distance"]), float(np.dot(probe, vectors[row[h["id"]]]))) for h in hits if h.get("id") in row]
    metric = calibrate(pairs)
    if metric is not None:
        await state.set_metric(store, metric)
        logger.info("kb=%s: vector backend reports %s", request.kb_id, metric.value)


async def _replaces_earlier_version(host: HostApi, state: KnowledgeBaseState, store: KbStore,
                                   request: IngestRequest, dim: int, deadlines: IngestDeadlines) -> bool:
    """Whether the document id may have vectors of an earlier upload, which go before the new ones.
    Not in a collection that may not exist (a delete would make Milvus create it with dimension
    1536): a KB that never had a vector has no earlier version, and one unknown is probed first.
    While plugin storage names none of the KB's files and they are still to be found in the
    vector DB (`files_unseen`), an id unknown here is asked of the vector DB (one listing): taken
    for new, a re-upload left its earlier version's chunks beyond its own answered (seed 6787), or,
    failing, the earlier version it never removed (seed 5809); it is asked once no call of the
    previous process can land any more (a tombstone of its failed upload of the id landing after
    the question stayed beside this upload: seed 7150). An id storage does not name may still have
    a dead process's tombstone (`_noted_by_a_dead_process`). Where an earlier version may be there
    and the vector DB could not be asked, the upload fails: with the vector DB's error, or
    PluginStorageFailure where storage could not name the probe."""
    file_id = request.document_id
    if not await state.is_stored(store, file_id):
        return await _noted_by_a_dead_process(host, state, request, deadlines)
    try:
        async with state.writes.write():
            opened = await state.open_collection(host, request.collection_id, dim, strict=True)
    except (LucidRagError, GateClosed):
        raise
    except Exception as error:  # noqa: BLE001 - the probe's upsert or delete
        raise _refused(error) from error
    if not opened:
        if state.never_had_vectors or state.writes.closed:
            return False  # nothing to replace; or the KB is being deleted (its writes fail)
        raise PluginStorageFailure(
            "LangBot's plugin storage failed before the file was stored, so LucidRAG could not "
            "keep track of it. Nothing was kept; upload the file again."
        )
    if state.only_the_vector_db_knows(file_id):
        await _after_previous_process(state, request, deadlines)
    if not state.only_the_vector_db_knows(file_id):
        return await state.is_stored(store, file_id)  # (the KB's files may have been found meanwhile)
    try:
        return await with_retries(lambda: holds_file(host, request.collection_id, file_id))
    except LucidRagError:
        raise
    except Exception as error:  # noqa: BLE001
        raise _unasked(error) from error


async def _noted_by_a_dead_process(host: HostApi, state: KnowledgeBaseState, request: IngestRequest,
                                   deadlines: IngestDeadlines) -> bool:
    """Whether a sweep note of a dead process names this id, which plugin storage does not: that
    process's upload of it failed where storage refused to note it, and its tombstone
    (`write_tombstone`, sent with the note), taken for the new upload's, would make a later
    process remove the COMPLETED file (seed 7150). Then the id is replaced (its vectors, the
    tombstone among them, go before the new ones). One listing of PROBE_FILE_ID per process on a
    KB that had vectors before it (`may_hold_dead_notes`), and one more once the previous
    process's calls can no longer land if the first came earlier; where the first shows notes of
    a dead process whose calls may still land, the upload waits until they cannot
    (`_after_previous_process`) and lists again."""
    if not state.may_hold_dead_notes():
        return False
    try:
        await state.look_for_dead_notes(host, request.collection_id)
        if state.dead_notes_may_still_land():
            await _after_previous_process(state, request, deadlines)
            await state.look_for_dead_notes(host, request.collection_id)
    except (LucidRagError, GateClosed):
        raise
    except Exception as error:  # noqa: BLE001
        raise _unasked(error) from error
    return request.document_id in (state.dead_notes or ())


def _unasked(error: Exception) -> VectorStoreFailure:
    return VectorStoreFailure(f"The vector database did not say whether it holds an earlier version of this "
                              f"file ({describe(error)}). Nothing was kept; upload the file again.")


async def _delete_previous_version(host: HostApi, state: KnowledgeBaseState, request: IngestRequest) -> None:
    """Re-ingesting a document id replaces it: its earlier vectors go first. Raises
    VectorStoreFailure if they could not: the new version's upsert overwrites only as many chunks
    as it has (and Milvus inserts), so a shorter one would leave the earlier version answered."""
    unanswered = LostAnswers()  # a delete whose answer was lost may land after the new vectors
    file_ids = [request.document_id]  # (and after a later upload's: noted with the file too)
    try:
        await with_retries(lambda: send(unanswered, request.document_id, None, lambda: send_delete(
            state.files, file_ids, lambda: host.vector_delete(request.collection_id, file_ids=file_ids))))
    except Exception as error:  # noqa: BLE001
        if is_kb_gone(error):
            return  # the upload fails once it writes (the KB's deletion closed its writes)
        raise VectorStoreFailure(
            f"The vector database did not remove the earlier version of this file ({describe(error)}). "
            "Upload the file again."
        ) from error
    if unanswered.lost:
        raise VectorStoreFailure("The vector database did not answer in time while the earlier version of this "
                                 "file was removed, so it could still remove the new one. Upload the file again.")


async def _after_late_calls(state: KnowledgeBaseState, request: IngestRequest, deadlines: IngestDeadlines) -> None:
    """Before the earlier version's removal and the first vector: wait until no call of this
    document id whose answer was lost can land any more (a removal of an earlier, failed or deleted
    upload, a write of an earlier upload, a delete of its record), nor a call of a dead process whose
    entry named it; landing later, it would remove this upload's vectors or record after it
    COMPLETED (seed 1783), or write an earlier version's. Raises VectorStoreFailure if that is past
    the upload's time."""
    await _wait_until(state, request, deadlines, state.calls_quiet_at(request.document_id),
                      "an unanswered change of an earlier upload to land", lambda left_s: (
                          "LangBot did not answer a change of an earlier upload of this file (a removal or a write), "
                          f"and may still do it (until {left_s} s from now): it would undo this upload. Nothing was "
                          "kept; upload the file again in a few minutes."))


async def _after_previous_process(state: KnowledgeBaseState, request: IngestRequest,
                                  deadlines: IngestDeadlines) -> None:
    """Before the vector DB is asked whether it holds this id where only it can tell (a KB whose
    plugin storage names none of its files, or one where a dead process left sweep notes): wait
    until no call of the previous process can land any more, as a tombstone of its failed upload
    of the id, landing after the question, would stay beside this upload (seed 7150). Raises
    VectorStoreFailure if that is past the upload's time."""
    await _wait_until(state, request, deadlines, state.previous_writes_until,
                      "the previous run's last changes to land", lambda left_s: (
                          "LucidRAG restarted while LangBot's plugin storage or vector database was failing, and "
                          f"LangBot may still carry out changes the previous run sent (until {left_s} s from now), "
                          "which could undo this upload. Nothing was kept; upload the file again in a few minutes."))


async def _wait_until(state: KnowledgeBaseState, request: IngestRequest, deadlines: IngestDeadlines,
                      quiet_at: float, what: str, too_late: Callable[[int], str]) -> None:
    """Wait until `quiet_at` (a monotonic time; past: no wait) for `what`, unless the KB is deleted
    meanwhile; raises VectorStoreFailure with `too_late(seconds left)` if that is past the upload's
    time for its work."""
    if quiet_at <= time.monotonic():
        return
    if quiet_at >= deadlines.work:
        raise VectorStoreFailure(too_late(int(quiet_at - time.monotonic())))
    logger.info("kb=%s doc=%s: waiting %.0f s for %s", request.kb_id, request.document_id,
                quiet_at - time.monotonic(), what)
    with state.writes.stopped_when_closed():  # the KB's deletion does not wait for it
        await asyncio.sleep(quiet_at - time.monotonic())


async def _remove_first_write(host: HostApi, state: KnowledgeBaseState, request: IngestRequest, dim: int) -> bool:
    """`_rollback` for a KB that never had a vector. False if it failed (reconciliation retries)."""
    try:
        await state.remove_first_write(host, request.collection_id, request.document_id, dim)
        return True
    except Exception as error:  # noqa: BLE001 - best effort; logged for the operator
        logger.error("kb=%s doc=%s: could not remove what a failed first write may have left (%s); it is "
                     "removed later", request.kb_id, request.document_id, describe(error))
        return False


async def _rollback(host: HostApi, state: KnowledgeBaseState, request: IngestRequest) -> bool:
    """Delete what this ingest wrote. False if that failed (the journal entry then stays, and the
    next reconciliation removes them)."""
    try:
        await delete_file_vectors(host, state.files, request.collection_id, [request.document_id])
        return True
    except Exception as error:  # noqa: BLE001 - best effort; logged for the operator
        if is_kb_gone(error):
            return True  # LangBot has removed the knowledge base: nothing of it can be reached any more
        logger.error("kb=%s doc=%s: could not remove partial vectors after a failure (%s); they are "
                     "removed later", request.kb_id, request.document_id, describe(error))
        return False
