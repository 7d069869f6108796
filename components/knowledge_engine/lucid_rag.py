"""The LangBot KnowledgeEngine component: a thin adapter between host contexts and `lucidrag`.

This is the single error boundary. Every hook catches once and maps failures to what the host
handles well: ingest → FAILED with the user-facing message (an exception would leave the file
"interrupted" and undeletable); retrieve → empty results; delete_document → False only when the
vector DB failed, so the user can retry; KB create/delete never raise.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from langbot_plugin.api.definition.components.knowledge_engine.engine import (
    KnowledgeEngine,
    KnowledgeEngineCapability,
)
from langbot_plugin.api.entities.builtin.provider.message import ContentElement
from langbot_plugin.api.entities.builtin.rag.context import (
    RetrievalContext,
    RetrievalResponse,
    RetrievalResultEntry,
)
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus
from langbot_plugin.api.entities.builtin.rag.models import (
    IngestionContext,
    IngestionResult,
)

from lucidrag.base.budget import HOOK_TIMEOUT_S, IngestDeadlines, hook_budget, until
from lucidrag.base.errors import KnowledgeBaseDeleted, LucidRagError, SettingsError
from lucidrag.base.writegate import GateClosed
from lucidrag.base.settings import (
    CreationSettings,
    creation_problems,
    invalid_creation_message,
    parse_creation_settings,
)
from lucidrag.engine import Engine
from lucidrag.ingestion.ingest import IngestRequest
from lucidrag.ingestion.parsing import document_from_parse_result
from lucidrag.state.failures import forget_failure, remember_outcome
from lucidrag.state.latewrites import noting_unanswered_writes
from lucidrag.state.saved_settings import save_creation_settings

logger = logging.getLogger(__name__)

# An ingest's work stops here; its commit or rollback follows within LangBot's 1200 s (budget.py)
INGEST_TIMEOUT_S = HOOK_TIMEOUT_S["ingest"] - 100.0
DELETE_KB_TIMEOUT_S = HOOK_TIMEOUT_S["kb_delete"] - 3.0
DEFAULT_INSTALLATION = "dedicated"


class LucidRag(KnowledgeEngine):
    @property
    def engine(self) -> Engine:
        return self.plugin.engine  # type: ignore[attr-defined]

    @classmethod
    def get_capabilities(cls) -> list[str]:
        return [KnowledgeEngineCapability.DOC_INGESTION, KnowledgeEngineCapability.DOC_PARSING]

    def _installation_id(self) -> str:
        binding = self.get_installation_binding()
        return str(getattr(binding, "installation_uuid", "") or DEFAULT_INSTALLATION)

    async def on_knowledge_base_create(self, kb_id: str, config: dict) -> None:
        try:
            with hook_budget("create"):
                await save_creation_settings(self.plugin, kb_id, config)  # for the console
                parse_creation_settings(config)
                # Marks the KB as having no vectors yet, so nothing touches the vector DB before the
                # first upsert (Milvus would create a 1536-dimension collection). Best effort.
                await self.engine.create_knowledge_base(self.plugin, self._installation_id(), kb_id)
        except LucidRagError as error:
            # Raising would fail KB creation with a bare HTTP 500; the same message is shown on
            # every upload instead, where the operator sees it.
            logger.warning("kb=%s: created with invalid settings: %s", kb_id, error)
        except Exception:  # noqa: BLE001 - raising would fail the KB creation with HTTP 500
            logger.exception("kb=%s: could not record the new knowledge base", kb_id)

    async def on_knowledge_base_delete(self, kb_id: str) -> None:
        try:
            await asyncio.wait_for(
                self.engine.delete_knowledge_base(self.plugin, self._installation_id(), kb_id),
                DELETE_KB_TIMEOUT_S,
            )
        except Exception:  # noqa: BLE001 - never block the host's KB deletion
            logger.exception("kb=%s: could not remove every vector of the deleted knowledge base", kb_id)

    async def ingest(self, context: IngestionContext) -> IngestionResult:
        deadlines = IngestDeadlines.starting_now(INGEST_TIMEOUT_S)
        with until(deadlines.rollback):
            try:
                result = await self._ingest(context, deadlines)
            except KnowledgeBaseDeleted as error:  # nothing may be stored for it, not even why
                return _failed(context.file_object.metadata.document_id, str(error))
            # For the console: why a file failed (LangBot shows only "Failed"), and the KB's creation
            # settings once per process (they cannot change); best effort, never raises.
            inst = self.engine.installation(self._installation_id())
            kb_id = context.knowledge_base_id
            state = inst.kbs.get(kb_id)
            try:  # a KB deletion waits for these writes, or they do not start
                async with (state.writes.write() if state is not None else contextlib.nullcontext()):
                    with noting_unanswered_writes(inst.unanswered_writes):
                        await remember_outcome(self.plugin, kb_id, result.document_id,
                                               result.error_message if result.status == DocumentStatus.FAILED else None,
                                               context.file_object.metadata.filename,
                                               None if kb_id in inst.settings_saved else context.creation_settings,
                                               context.file_object.metadata.file_size or 0)
            except GateClosed:  # the KB is being deleted: nothing more is stored for it
                return result
            inst.settings_saved.add(kb_id)
        return result

    async def _ingest(self, context: IngestionContext, deadlines: IngestDeadlines) -> IngestionResult:
        """The outcome is decided by the engine (ingestion/ingest.py); this maps it for LangBot."""
        document_id = context.file_object.metadata.document_id
        try:
            request = _ingest_request(context)
            outcome = await self.engine.ingest(self.plugin, self._installation_id(), request, deadlines)
        except KnowledgeBaseDeleted:
            raise
        except LucidRagError as error:
            logger.warning("kb=%s doc=%s: ingest failed: %s", context.knowledge_base_id, document_id, error)
            return _failed(document_id, str(error))
        except Exception as error:  # noqa: BLE001 - the host must never see an exception here
            logger.exception("kb=%s doc=%s: unexpected ingest error", context.knowledge_base_id, document_id)
            return _failed(document_id, f"Unexpected error while processing the file ({type(error).__name__}: "
                           f"{error}). Please report this to the plugin's maintainers.")
        return IngestionResult(
            document_id=document_id,
            status=DocumentStatus.COMPLETED,
            chunks_created=outcome.chunks,
            metadata={"format": outcome.format},
        )

    async def retrieve(self, context: RetrievalContext) -> RetrievalResponse:
        kb_id = context.knowledge_base_id or context.get_collection_id()
        try:
            hits = await self.engine.retrieve(
                self.plugin, self._installation_id(), kb_id, context.get_collection_id(), context.query,
                context.creation_settings, context.retrieval_settings, context.filters,
            )
        except LucidRagError as error:
            logger.warning("kb=%s: retrieve failed: %s", kb_id, error)
            return RetrievalResponse(results=[], total_found=0, metadata={"error": str(error)})
        except Exception as error:  # noqa: BLE001
            logger.exception("kb=%s: unexpected retrieve error", kb_id)
            return RetrievalResponse(results=[], total_found=0, metadata={"error": type(error).__name__})
        entries = [
            RetrievalResultEntry(
                id=hit.chunk.chunk_id,
                content=[ContentElement(type="text", text=hit.content)],
                metadata=hit.metadata(),
                distance=hit.distance,
                score=hit.score,
            )
            for hit in hits
        ]
        return RetrievalResponse(results=entries, total_found=len(entries))

    async def delete_document(self, kb_id: str, document_id: str) -> bool:
        try:
            with hook_budget("delete"):
                await self.engine.delete_document(self.plugin, self._installation_id(), kb_id, document_id)
                await forget_failure(self.plugin, kb_id, document_id)
            return True
        except Exception:  # noqa: BLE001 - False tells the host (and the user) to retry
            logger.exception("kb=%s doc=%s: delete failed", kb_id, document_id)
            return False


def _ingest_request(context: IngestionContext) -> IngestRequest:
    meta = context.file_object.metadata
    parsed = None
    if context.parsed_content is not None:
        parsed = document_from_parse_result(
            context.parsed_content.text,
            [(s.content, s.heading, s.level, s.page) for s in context.parsed_content.sections],
        )
    return IngestRequest(
        kb_id=context.knowledge_base_id,
        collection_id=context.get_collection_id(),
        document_id=meta.document_id,
        storage_path=context.file_object.storage_path,
        filename=meta.filename,
        mime_type=meta.mime_type or "",
        settings=_creation_settings(context.creation_settings),
        parsed=parsed,
    )


def _creation_settings(raw: dict) -> CreationSettings:
    """Parsed settings; invalid ones fail the upload naming each bad setting and its valid range."""
    try:
        return parse_creation_settings(raw)
    except SettingsError as error:
        problems = creation_problems(raw)
        raise SettingsError(invalid_creation_message(str(error), problems) if problems else str(error)) from error


def _failed(document_id: str, message: str) -> IngestionResult:
    return IngestionResult(document_id=document_id, status=DocumentStatus.FAILED, error_message=message)
