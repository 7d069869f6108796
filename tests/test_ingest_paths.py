"""The ingest pipeline's own paths (lucidrag/ingestion/ingest.py): what an operator reads when a
file fails, what the vector DB receives (batches, texts, the first write into a new collection),
the distance metric learnt from the first file, and what a file's record keeps.

Written against the survivors of a mutation run (docs/TESTING.md): each test fails when one line
of ingest.py is changed the way a survivor changed it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import math
import time
from datetime import datetime, timezone
from typing import Any

import docx
import pytest
from docx.shared import Inches
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from lucidrag.ingestion.ingest import UPSERT_BATCH
from lucidrag.state.storage_keys import journal_key
from lucidrag.state.store import KbStore
from lucidrag.vectors.scoring import Metric
from tests import ocr_samples
from tests.conftest import MODEL, FakePlugin, Harness
from tests.fakes import HostError
from tests.test_console import ConsoleHost, api, create_kb, rows
from tests.test_ocr import _bar_chart
from tests.test_state_runtime import restarted

KB = "kb-ingest-paths"
SOLAR = b"The solar array on building C produces 42 kilowatts at noon in June."
SMALL_CHUNKS = {"chunk_size": 64, "chunk_overlap": 0}


def parts(count: int, name: str = "pump") -> bytes:
    """`count` paragraphs, one chunk each with SMALL_CHUNKS."""
    return "\n\n".join(f"Part {i} of the {name} is checked every {i % 7 + 1} weeks." for i in range(count)).encode()


# ---------------------------------------------------------------- what a failed file says
def _word_file_of_charts(text: str = "") -> bytes:
    """A .docx of one bar chart (a picture without text), after `text` if given."""
    document = docx.Document()
    if text:
        document.add_paragraph(text)
    document.add_picture(io.BytesIO(ocr_samples.image_bytes(_bar_chart())), width=Inches(4))
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


async def test_a_word_file_of_only_a_chart_fails_saying_a_vision_model_would_read_it(harness: Harness, host):
    result = await harness.ingest(KB, "chart.docx", _word_file_of_charts())
    assert result.status == DocumentStatus.FAILED
    assert result.error_message == ("No text could be extracted from this file, not even by OCR from its pictures. "
                                    "Check that the file opens correctly; for pictures without text (charts, "
                                    "photos) choose a vision model when creating the knowledge base.")
    assert host.vector_count(KB) == 0


async def test_a_file_langbot_cannot_hand_over_fails_naming_langbots_reason(harness: Harness, host):
    host.fail("get_knowledge_file_stream", error=HostError("object storage bucket is unreachable"))
    result = await harness.ingest(KB, "a.txt", SOLAR)
    assert result.status == DocumentStatus.FAILED
    assert result.error_message == ("LangBot could not hand over the uploaded file (object storage bucket is "
                                    "unreachable). Upload it again.")


async def test_a_journal_entry_storage_refuses_fails_the_file_saying_nothing_was_kept(harness: Harness, host):
    await harness.ingest(KB, "solar.txt", SOLAR)  # storage names files now: a restart trusts it
    host.fail("set_plugin_storage", when=lambda key, **_: "/journal/" in key)
    result = await harness.ingest(KB, "tea.txt", b"Oolong tea is partially oxidised.")
    assert result.status == DocumentStatus.FAILED
    assert result.error_message == ("LangBot's plugin storage failed before the file was stored, so LucidRAG "
                                    "could not keep track of it. Nothing was kept; upload the file again.")


async def test_a_record_storage_refuses_fails_the_file_saying_it_would_be_lost(harness: Harness, host):
    """A new KB's storage says "never had a vector" and cannot be told otherwise: a restart would
    not look for the file."""
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    host.fail("set_plugin_storage", when=lambda key, **_: "/journal/" not in key)  # all but the journal
    result = await harness.ingest(KB, "tea.txt", b"Oolong tea is partially oxidised.")
    assert result.status == DocumentStatus.FAILED
    assert result.error_message == ("LangBot's plugin storage failed while the file was saved, so it would be lost "
                                    "at the next restart. Nothing was kept; upload the file again.")
    assert host.vectors_of(KB, result.document_id) == []
    # a refused record save may still land: its journal entry, "nothing written", is left for the
    # next process, which removes it (and the record, if one landed)
    assert [key for key in host.storage if result.document_id in key] == [journal_key(KB, result.document_id)]
    entry = await harness.invoke(KbStore(host, KB).read_journal, result.document_id)
    assert entry is not None and entry.chunks == 0
    host.faults.clear()
    back = restarted(host)
    assert await back.texts(KB, "oolong tea", settings={"search_mode": "keyword"}) == []
    await back.retrieve(KB, "oolong tea")
    assert not [key for key in host.storage if result.document_id in key], "its journal entry is left behind"


async def test_a_new_milvus_kb_whose_first_upsert_failed_takes_the_next_upload():
    """Deleting the failed file's vectors would make Milvus create the collection with its default
    dimension, which then refuses every vector of the real model."""
    host = FakePlugin.milvus()
    harness = Harness(host)
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    host.fail("vector_upsert", error=HostError("insert refused"))
    failed = await harness.ingest(KB, "solar.txt", SOLAR)
    assert failed.status == DocumentStatus.FAILED
    host.faults.clear()
    again = await harness.ingest(KB, "solar.txt", SOLAR)
    assert again.status == DocumentStatus.COMPLETED, again.error_message
    assert "42 kilowatts" in (await harness.texts(KB, "How many kilowatts does the solar array produce?"))[0]


async def test_a_refused_upsert_fails_blaming_the_vector_database(harness: Harness, host):
    host.fail("vector_upsert", error=HostError("collection is read-only"))
    result = await harness.ingest(KB, "a.txt", SOLAR)
    assert result.status == DocumentStatus.FAILED
    assert result.error_message == ("The vector database refused the data: collection is read-only. Nothing was "
                                    "kept; check the vector database in LangBot's settings and upload the file "
                                    "again.")


async def test_a_connection_lost_during_the_upsert_blames_the_connection_not_the_vector_database(harness: Harness, host):
    await harness.ingest(KB, "solar.txt", SOLAR)
    host.disconnect_on("vector_upsert")
    result = await harness.ingest(KB, "tea.txt", b"Oolong tea is partially oxidised.")
    assert result.status == DocumentStatus.FAILED
    assert "vector database refused" not in result.error_message
    assert "LangBot" in result.error_message


# ---------------------------------------------------------------- what the vector DB receives
async def test_a_long_file_is_written_in_batches_of_at_most_a_hundred_chunks(harness: Harness, host):
    sizes: list[int] = []
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": MODEL})  # (no probe first)
    real = host.vector_upsert

    async def upsert(**kwargs: Any) -> None:
        sizes.append(len(kwargs["ids"]))
        await real(**kwargs)

    host.vector_upsert = upsert  # type: ignore[method-assign]
    result = await harness.ingest(KB, "parts.txt", parts(250), settings=SMALL_CHUNKS)
    assert result.status == DocumentStatus.COMPLETED and result.chunks_created > 2 * UPSERT_BATCH
    # the chunks and the file's document vector
    assert sum(sizes) == result.chunks_created + 1 == len(host.vectors_of(KB, result.document_id))
    assert len(sizes) == math.ceil(result.chunks_created / UPSERT_BATCH) and max(sizes) == UPSERT_BATCH


async def test_each_vector_is_stored_with_its_chunk_text_as_the_document(harness: Harness, host):
    """Chroma keeps `documents` (LangBot's own full-text search reads them)."""
    documents: dict[str, str] = {}
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": MODEL})  # (no probe first)
    real = host.vector_upsert

    async def upsert(**kwargs: Any) -> None:
        documents.update(zip(kwargs["ids"], kwargs["documents"] or [None] * len(kwargs["ids"])))
        await real(**kwargs)

    host.vector_upsert = upsert  # type: ignore[method-assign]
    result = await harness.ingest(KB, "parts.txt", parts(5), settings=SMALL_CHUNKS)
    stored = {cid: meta["text"] for cid, (_, meta) in host.collections[KB].items()}
    assert result.chunks_created == 5 and documents == stored


class MilvusLiteHost(FakePlugin):
    """Milvus Lite creates a collection on its first insert; a second insert that arrives while the
    first is still creating it fails ("File exists")."""

    def __init__(self, uploads: int) -> None:
        super().__init__()
        self.creating: set[str] = set()
        self.everyone_embedded = asyncio.Event()
        self.waiting = uploads

    async def invoke_embedding(self, embedding_model_uuid: str, texts: list[str]) -> list[list[float]]:
        vectors = await super().invoke_embedding(embedding_model_uuid, texts)
        self.waiting -= 1  # every upload reaches its first upsert at about the same time
        if self.waiting == 0:
            self.everyone_embedded.set()
        with contextlib.suppress(TimeoutError):  # never hangs
            await asyncio.wait_for(self.everyone_embedded.wait(), 5)
        return vectors

    async def vector_upsert(self, collection_id: str, vectors: list[list[float]], ids: list[str],
                            metadata: list[dict[str, Any]] | None = None, documents: list[str] | None = None) -> None:
        if collection_id in self.creating:
            raise HostError("[Errno 17] File exists: milvus_lite collection")
        if collection_id not in self.collections:
            self.creating.add(collection_id)
            try:
                await asyncio.sleep(0.05)
                await super().vector_upsert(collection_id, vectors, ids, metadata, documents)
            finally:
                self.creating.discard(collection_id)
            return
        await super().vector_upsert(collection_id, vectors, ids, metadata, documents)


async def test_uploads_racing_into_a_new_collection_write_their_first_batches_one_at_a_time():
    host = MilvusLiteHost(uploads=3)
    harness = Harness(host)
    results = await asyncio.gather(*(harness.ingest(KB, f"{name}.txt", parts(4, name), settings=SMALL_CHUNKS)
                                     for name in ("pump", "valve", "fan")))
    assert [r.status for r in results] == [DocumentStatus.COMPLETED] * 3, [r.error_message for r in results]
    assert host.vector_count(KB) == sum(r.chunks_created + (r.chunks_created > 1) for r in results)  # + document vectors


# ---------------------------------------------------------------- the metric learnt at the first ingest
@pytest.mark.parametrize("backend, metric", [(FakePlugin, Metric.SQUARED_L2),
                                             (lambda: FakePlugin(metric="cosine_distance"), Metric.COSINE_DISTANCE),
                                             (lambda: FakePlugin(metric="similarity"), Metric.SIMILARITY)],
                         ids=["chroma", "pgvector", "milvus"])
async def test_the_first_file_stores_how_the_vector_db_reports_distance_before_any_query(backend, metric):
    """A restarted process scores hits with the stored metric, without re-measuring it per query."""
    harness = Harness(backend())
    result = await harness.ingest(KB, "parts.txt", parts(12), settings=SMALL_CHUNKS)
    assert result.status == DocumentStatus.COMPLETED and result.chunks_created >= 8
    meta = await harness.invoke(KbStore(harness.host, KB).load_meta)
    assert meta is not None and meta.metric is metric and meta.has_vectors is True


async def test_a_first_file_whose_metric_cannot_be_measured_still_marks_the_kb_as_having_vectors(harness: Harness, host):
    """Without that mark a restart would take the KB for one that never had a vector."""
    await harness.component.on_knowledge_base_create(KB, {"embedding_model_uuid": "embed-model-1"})
    host.fail("vector_search")  # the calibration search fails: no metric
    result = await harness.ingest(KB, "solar.txt", SOLAR)
    assert result.status == DocumentStatus.COMPLETED
    meta = await harness.invoke(KbStore(host, KB).load_meta)
    assert meta is not None and meta.metric is None and meta.has_vectors is True
    host.faults.clear()
    assert "42 kilowatts" in (await restarted(host).texts(KB, "How many kilowatts does the solar array produce?"))[0]


# ---------------------------------------------------------------- what the file's record keeps
async def test_a_file_without_an_extension_is_parsed_as_its_mime_type_says(harness: Harness, host):
    result = await harness.ingest(KB, "upload", b"# Pump manual\n\n## Filters\n\nReplace the intake filter every 90 days.\n",
                                  mime_type="text/markdown")
    assert result.status == DocumentStatus.COMPLETED and result.metadata["format"] == "markdown"
    top = (await harness.retrieve(KB, "intake filter")).results[0]
    assert top.metadata["heading"] == "Pump manual › Filters"


async def test_every_hit_is_titled_with_the_files_name_also_after_a_restart(harness: Harness, host):
    await harness.ingest(KB, "manual.md", b"# Pump manual\n\n## Filters\n\nReplace the intake filter every 90 days.\n")
    for answering in (harness, restarted(host)):
        top = (await answering.retrieve(KB, "intake filter")).results[0]
        assert top.metadata["document_name"] == "Pump manual"
    assert {m["document_name"] for m in host.vectors_of(KB)} == {"Pump manual"}


async def test_the_console_shows_how_many_pictures_the_vision_model_described():
    from components.pages.console.console import LucidRagConsole

    host = ConsoleHost()
    host.llm_fn = lambda messages: "A bar chart: sales rising in each of four months."
    harness, page = Harness(host), LucidRagConsole()
    page.plugin = host  # type: ignore[assignment]
    await create_kb(harness, host, KB)
    result = await harness.ingest(KB, "sales.docx", _word_file_of_charts("Monthly sales of the northern stores."),
                                  settings={"vision_model_uuid": "vision-1"})
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    ocr = rows(await api(page, "/kb", kb_id=KB))[result.document_id]["ocr"]
    assert ocr.get("vision_described") == 1, ocr


async def test_deleting_a_kb_frees_the_vectors_its_files_left_in_the_embedding_cache(harness: Harness, host):
    cache = host.engine.installation("dedicated").cache
    await harness.ingest(KB, "parts.txt", parts(6), settings=SMALL_CHUNKS)
    assert cache.nbytes > 0
    await harness.component.on_knowledge_base_delete(KB)
    assert cache.nbytes == 0 and len(cache) == 0


async def test_a_file_without_a_title_is_named_by_its_utc_upload_time_whatever_the_servers_time_zone(
        harness: Harness, monkeypatch: pytest.MonkeyPatch):
    # a zone whose date differs from UTC's now, by an hour or more either way
    zone = "Etc/GMT+12" if datetime.now(timezone.utc).hour < 11 else "Etc/GMT-14"
    try:
        with monkeypatch.context() as local:
            local.setenv("TZ", zone)
            time.tzset()
            assert datetime.now().date() != datetime.now(timezone.utc).date()
            await harness.ingest(KB, "notes.txt", b"The inverter manual says to reset it with the red button.")
            top = (await harness.retrieve(KB, "inverter reset red button")).results[0]
    finally:
        time.tzset()  # the process's own zone again
    name = top.metadata["document_name"]
    assert name.startswith(f"TEXT file, {datetime.now(timezone.utc).date().isoformat()} ") and name.endswith(" UTC")
