"""The LucidRAG console's backend: what the sidebar page (components/pages/console) shows and the
few repairs it may run. Typed, host-agnostic, tested without a browser (tests/test_console.py).

Scope: only knowledge bases of the calling installation. LangBot's `list_knowledge_bases` lists
every KB of the workspace (any engine) and plugin storage is per installation, so a KB is ours when
this installation's storage holds something of it (every LucidRAG KB gets its settings saved at
creation) and, when the host answers, it still exists there.

Read-only except the explicit repair actions in `REPAIRS`. Every endpoint answers a JSON-able dict
or raises `ConsoleError` with a message for the operator.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from lucidrag.base.budget import HOOK_RESERVE, HOOK_TIMEOUT_S, BudgetSpent, hook_budget
from lucidrag.base.errors import LucidRagError
from lucidrag.base.host import HostApi, describe
from lucidrag.base.settings import (
    CREATION_DEFAULTS,
    MAX_TOP_K,
    SettingProblem,
    creation_problems,
)
from lucidrag.engine import Engine
from lucidrag.retrieval.retrieve import Hit, citation
from lucidrag.state.failures import FailureRecord, forget_failure, list_failures
from lucidrag.state.kbstate import PROBE_FILE_ID, KnowledgeBaseState
from lucidrag.state.lifecycle import FileState
from lucidrag.state.querylog import QueryLog
from lucidrag.state.querystats import (
    WINDOWS,
    entry_row,
    summary,
    to_csv,
    to_json,
    unanswered,
    unanswered_csv,
    unanswered_json,
)
from lucidrag.state.records import FileRecord
from lucidrag.state.saved_settings import load_creation_settings
from lucidrag.state.storage_keys import (
    failure_file_ids,
    is_file_id,
    journal_file_ids,
    kb_ids,
    query_log_blocks,
    record_file_ids,
)
from lucidrag.state.store import KbStore, list_keys
from lucidrag.vectors.vectorscan import LIST_PAGE, LIST_WINDOW

logger = logging.getLogger(__name__)

PREVIEW_CHARS = 600  # of each chunk in the preview
MAX_PREVIEW = 200  # chunks per preview request
SCAN_PAGES = 20  # vector_list pages an orphan scan reads at most (LIST_PAGE items each)
SEARCH_TOP_K = 10
MAX_LISTED_FILES = 500  # files whose records a file list reads (a KB may hold 50,000)
REPAIR_BUDGET_S = 20.0  # a repair request may spend this long retrying storage writes


class ConsoleError(Exception):
    """`str(error)` is shown to the operator."""


class ConsoleHost(HostApi, Protocol):
    async def list_knowledge_bases(self) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class KbRef:
    kb_id: str
    name: str
    description: str


# What to do about a failure, keyed by words of the engine's own message (errors.py wording). The
# page shows the advice in the operator's language by its key (console.html: advice_<key>).
_ADVICE: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("created with invalid settings",), "invalid_settings", "Create a new LucidRAG knowledge base with valid settings "
     "and upload the file there; creation settings cannot be changed."),
    (("encrypted", "password"), "encrypted", "Remove the password (print to PDF or save an unprotected copy), "
     "then upload it again."),
    (("scan", "ocr", "picture"), "ocr", "Scan the pages again at 200-300 dpi or upload a sharper picture, "
     "or a version of the file with selectable text."),
    (("embedding",), "embedding", "Check the embedding model in LangBot (Models), then delete the file and "
     "upload it again."),
    (("vector database",), "vector_db", "Check the vector database in LangBot's settings, then delete the file "
     "and upload it again."),
)
_DEFAULT_ADVICE = "Follow the message above, delete the failed file in LangBot and upload it again."


def advice_for(reason: str) -> tuple[str, str]:
    """(key, English text) of what to do about a failure."""
    lowered = reason.lower()
    for words, key, advice in _ADVICE:
        if any(w in lowered for w in words):
            return key, advice
    return "default", _DEFAULT_ADVICE


class Console:
    def __init__(self, host: ConsoleHost, engine: Engine, installation_id: str,
                 creation_schema: Sequence[Mapping[str, Any]] = ()) -> None:
        """`creation_schema`: the engine's `spec.creation_schema` (the labels LangBot's form shows)."""
        self.host = host
        self.engine = engine
        self.installation_id = installation_id
        self.creation_schema = creation_schema
        self._keys: list[str] | None = None

    async def handle(self, endpoint: str, body: Any) -> dict[str, Any]:
        routes: dict[str, Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]] = {
            "/overview": self.overview,
            "/kb": self.kb_detail,
            "/chunks": self.chunks,
            "/search": self.search,
            "/scan": self.scan,
            "/repair": self.repair,
            "/analytics": self.analytics,
            "/analytics/export": self.export_questions,
            "/analytics/clear": self.clear_questions,
        }
        route = routes.get(endpoint.rstrip("/") or "/")
        if route is None:
            raise ConsoleError(f"Unknown console endpoint {endpoint!r}.")
        try:  # the page gets an answer before the runtime gives up on the request (and cancels it)
            with hook_budget("console") as deadline:
                async with asyncio.timeout_at(asyncio.get_running_loop().time()
                                              + deadline - time.monotonic() + HOOK_TIMEOUT_S["console"] * HOOK_RESERVE / 2):
                    return await route(body if isinstance(body, Mapping) else {})
        except (BudgetSpent, TimeoutError) as error:
            raise ConsoleError("LangBot did not answer in time; try again (repairs continue where they "
                               "stopped).") from error

    # ------------------------------------------------------------------ scope
    async def _storage_keys(self) -> list[str]:
        if self._keys is None:
            snapshot = await list_keys(self.host)
            if snapshot is None:
                raise ConsoleError("LangBot's plugin storage is not answering; the console needs it to find "
                                   "this installation's knowledge bases.")
            self._keys = list(snapshot.keys)
        return self._keys

    async def knowledge_bases(self) -> list[KbRef]:
        ours = kb_ids(await self._storage_keys())
        try:
            listed = {str(kb["uuid"]): kb for kb in await self.host.list_knowledge_bases()}
        except Exception as error:  # noqa: BLE001 - still show what storage knows, unnamed
            logger.warning("console: list_knowledge_bases failed (%s)", describe(error))
            return [KbRef(kb, "", "") for kb in ours]
        refs = [KbRef(kb, str(listed[kb].get("name") or ""), str(listed[kb].get("description") or ""))
                for kb in ours if kb in listed]
        return sorted(refs, key=lambda r: (r.name.lower(), r.kb_id))

    async def _kb(self, body: Mapping[str, Any]) -> KbRef:
        kb_id = str(body.get("kb_id") or "")
        for ref in await self.knowledge_bases():
            if ref.kb_id == kb_id:
                return ref
        raise ConsoleError("This knowledge base is not a LucidRAG knowledge base of this installation.")

    async def _state(self, kb_id: str) -> KnowledgeBaseState:
        state = self.engine.installation(self.installation_id).kb(kb_id)
        await state.ensure_loaded(self.host, kb_id)  # collection id = KB uuid
        return state

    # ------------------------------------------------------------------ reads
    async def overview(self, body: Mapping[str, Any]) -> dict[str, Any]:
        keys = await self._storage_keys()
        out = []
        kbs = self.engine.installation(self.installation_id).kbs
        for ref in await self.knowledge_bases():
            live = kbs.get(ref.kb_id)
            ingesting = live.journalled_on_purpose if live is not None else set()
            settings = await load_creation_settings(self.host, ref.kb_id)
            failed = failure_file_ids(keys, ref.kb_id)
            out.append({
                "kb_id": ref.kb_id,
                "name": ref.name or ref.kb_id,
                "description": ref.description,
                "files": len(record_file_ids(keys, ref.kb_id)),
                "failed": len(failed),
                "interrupted": len(_interrupted(keys, ref.kb_id, ingesting, failed)),
                "invalid_settings": [p.name for p in creation_problems(settings)] if settings is not None else [],
            })
        return {"knowledge_bases": out}

    async def kb_detail(self, body: Mapping[str, Any]) -> dict[str, Any]:
        ref = await self._kb(body)
        keys = await self._storage_keys()
        state = await self._state(ref.kb_id)
        failures = await list_failures(self.host, ref.kb_id, keys)
        interrupted = _interrupted(keys, ref.kb_id, state.journalled_on_purpose, failure_file_ids(keys, ref.kb_id))
        known = state.known_files()
        listed = sorted(known)[:MAX_LISTED_FILES]
        records = await state.file_records(self.host, ref.kb_id, listed)
        files = [_file_row(record, "unsaved" if fid in state.unsaved else "ready")
                 for fid, record in sorted(records.items(), key=lambda kv: kv[1].name.lower())]
        files += [_failure_row(f) for f in failures if f.file_id not in known]
        reasoned = known | {f.file_id for f in failures} | {PROBE_FILE_ID}
        files += [_failed_here_row(fid) for fid in sorted(state.files.of(FileState.FAILED)) if fid not in reasoned]
        files += [_interrupted_row(fid) for fid in interrupted if fid not in known]
        files += [_ingesting_row(fid) for fid in sorted(state.in_flight) if fid not in known]
        settings = await load_creation_settings(self.host, ref.kb_id)
        return {
            "kb_id": ref.kb_id,
            "name": ref.name or ref.kb_id,
            "files": files,
            "files_listed": len(listed),
            "files_not_listed": max(0, len(known) - len(listed)),
            "health": _health(state, interrupted, len(failures)),
            "settings": _settings_view(settings, self.creation_schema),
        }

    async def chunks(self, body: Mapping[str, Any]) -> dict[str, Any]:
        ref = await self._kb(body)
        state = await self._state(ref.kb_id)
        file_id = _file_id(body)
        record = (await state.file_records(self.host, ref.kb_id, [file_id])).get(file_id) \
            if file_id in state.known_files() else None
        if record is None:
            raise ConsoleError("This file has no chunks in this knowledge base (failed, deleted or never ingested).")
        offset = _number(body.get("offset"), 0, 0, len(record.chunks))
        limit = _number(body.get("limit"), 50, 1, MAX_PREVIEW)
        return {
            "file_id": record.file_id,
            "title": record.name,
            "total": len(record.chunks),
            "offset": offset,
            "chunks": [{
                "index": c.index,
                "heading": c.heading,
                "page": c.page,
                "text": c.text[:PREVIEW_CHARS],
                "truncated": len(c.text) > PREVIEW_CHARS,
            } for c in record.chunks[offset : offset + limit]],
        }

    async def search(self, body: Mapping[str, Any]) -> dict[str, Any]:
        ref = await self._kb(body)
        query = str(body.get("query") or "").strip()
        if not query:
            raise ConsoleError("Type a question or some words to search for.")
        top_k = _number(body.get("top_k"), SEARCH_TOP_K, 1, MAX_TOP_K)
        settings = await load_creation_settings(self.host, ref.kb_id) or {}
        model = str(settings.get("embedding_model_uuid") or "")
        # Without a known embedding model only the keyword half can run, and nothing can judge
        # whether a passage answers (the relevance cut weighs the vector search too); chunking
        # settings play no part in retrieval, so a KB created with invalid ones can still be searched.
        mode = "hybrid" if model else "keyword"
        try:
            hits = await self.engine.retrieve(
                self.host, self.installation_id, ref.kb_id, ref.kb_id, query,
                {"embedding_model_uuid": model or "unknown"},
                # the source line is shown beside the passage (title, citation), not in it
                {"top_k": top_k, "search_mode": mode, "context_window": 0, "source_line": False,
                 "relevance_cut": "auto" if model else "off"}, None,
                log=False)
        except LucidRagError as error:
            raise ConsoleError(str(error)) from error
        return {"query": query, "mode": mode, "hits": [_hit_row(h) for h in hits],
                "note": "" if model else "The embedding model of this knowledge base is not known yet "
                "(it is saved at the next upload): keyword scores only."}

    async def scan(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Read-only: files whose vectors are in the vector DB but that LucidRAG has no record of
        (a crash mid-upload, a rollback that failed). Bounded to SCAN_PAGES pages."""
        ref = await self._kb(body)
        state = await self._state(ref.kb_id)
        if state.repair.finding_files:
            # Storage lost the records and the files are still to be found in the vector DB:
            # every file not found yet would look like an orphan.
            return {"orphans": [], "complete": False, "scanned": 0, "finding_files": True}
        if state.fresh and not state.has_files():
            # Listing would make LangBot's Milvus adapter create a wrong-dimension collection.
            return {"orphans": [], "complete": True, "scanned": 0}
        counts: dict[str, int] = {}
        scanned, complete, offset = 0, False, 0
        for _ in range(SCAN_PAGES):
            if offset + LIST_PAGE > LIST_WINDOW:
                break
            try:
                page = await self.host.vector_list(ref.kb_id, limit=LIST_PAGE, offset=offset)
            except Exception as error:  # noqa: BLE001
                raise ConsoleError(f"The vector database did not list the knowledge base: {describe(error)}") from error
            items = (page or {}).get("items") or []
            for item in items:
                file_id = str((item.get("metadata") or {}).get("file_id") or "")
                if file_id:
                    counts[file_id] = counts.get(file_id, 0) + 1
            scanned += len(items)
            offset += len(items)
            if len(items) < LIST_PAGE:
                complete = True
                break
        known = state.known_files()
        orphans = [{"file_id": fid, "vectors": n} for fid, n in sorted(counts.items())
                   if fid not in known and fid not in state.in_flight]
        return {"orphans": orphans, "complete": complete, "scanned": scanned}

    # ------------------------------------------------------------------ questions asked
    async def _query_log(self, kb_id: str) -> QueryLog:
        """The KB's query log, everything recorded saved first (so the view survives a restart;
        what cannot be saved is shown all the same)."""
        inst = self.engine.installation(self.installation_id)
        log = inst.query_log(kb_id)
        blocks = query_log_blocks(await self._storage_keys(), kb_id)
        with inst.bookkeeping.guard("saving the query log"):
            await log.save(self.host, blocks, force=True)
        return log

    async def analytics(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The recent questions, newest first, and a summary of the last hour, day and week."""
        ref = await self._kb(body)
        log = await self._query_log(ref.kb_id)
        entries = log.entries()
        state = await self._state(ref.kb_id)
        known = state.known_files()
        named = sorted(known)[:MAX_LISTED_FILES]
        records = await state.file_records(self.host, ref.kb_id, named)
        names = {fid: record.name or f"{(record.format or 'unknown').upper()} file" for fid, record in records.items()}
        now = time.time()
        failures = self.engine.installation(self.installation_id).bookkeeping
        return {
            "kb_id": ref.kb_id,
            "questions": [entry_row(e) for e in entries],
            "kept": len(entries),
            "capacity": log.capacity,
            "unreadable": not log.loaded,  # older questions in storage could not be read (yet)
            "windows": {name: summary(entries, now - seconds, known, names) for name, seconds in WINDOWS.items()},
            # the query logs' own errors (every KB of this installation, since the plugin started)
            "bookkeeping_errors": {"count": failures.count, "last": failures.last, "last_at": failures.last_at},
        }

    async def export_questions(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Every kept question (`list` "questions", the default) or what the knowledge base could
        not answer among them (`list` "unanswered": one row per question, with its count), as CSV
        or JSON text the page shows for copying."""
        ref = await self._kb(body)
        entries = (await self._query_log(ref.kb_id)).entries()
        kind = "csv" if body.get("format") == "csv" else "json"
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        mime = "text/csv" if kind == "csv" else "application/json"
        if body.get("list") == "unanswered":
            gaps = unanswered(entries)
            return {"filename": f"lucidrag-unanswered-{stamp}.{kind}", "count": len(gaps), "mime": mime,
                    "list": "unanswered", "content": unanswered_csv(gaps) if kind == "csv" else unanswered_json(gaps)}
        return {"filename": f"lucidrag-questions-{stamp}.{kind}", "count": len(entries), "mime": mime,
                "list": "questions", "content": to_csv(entries) if kind == "csv" else to_json(entries)}

    async def clear_questions(self, body: Mapping[str, Any]) -> dict[str, Any]:
        ref = await self._kb(body)
        log = self.engine.installation(self.installation_id).query_log(ref.kb_id)
        if not await log.clear(self.host, query_log_blocks(await self._storage_keys(), ref.kb_id)):
            raise ConsoleError("The questions are cleared here, but LangBot's plugin storage did not delete all "
                               "of them; they are deleted with the next requests. Click Clear again to retry now.")
        return {"cleared": True}

    # ------------------------------------------------------------------ repairs
    async def repair(self, body: Mapping[str, Any]) -> dict[str, Any]:
        ref = await self._kb(body)
        action = str(body.get("action") or "")
        if action == "remove_orphan_vectors":
            return await self._remove_orphan_vectors(ref.kb_id, _file_id(body),
                                                     body.get("langbot_status") == "interrupted")
        if action == "retry_saving_records":
            return await self._retry_saving_records(ref.kb_id)
        if action == "rebuild_from_vector_db":
            return await self._rebuild_from_vector_db(ref.kb_id)
        raise ConsoleError(f"Unknown repair action {action!r}.")

    async def _remove_orphan_vectors(self, kb_id: str, file_id: str, interrupted_in_langbot: bool) -> dict[str, Any]:
        """Delete a file's vectors, record and journal entry, as LangBot's delete would. For files
        LangBot cannot delete: orphans, ingests a crash cut short, and files LangBot shows as
        interrupted (it refuses to delete those, even when the plugin finished and adopted them)."""
        state = await self._state(kb_id)
        if not file_id:
            raise ConsoleError("Choose the file whose vectors should be removed.")
        if file_id in state.in_flight:
            raise ConsoleError("This file is being uploaded right now; wait until LangBot shows it as completed "
                               "or failed.")
        if (state.repair.finding_files) and file_id not in state.known_files():
            raise ConsoleError("LucidRAG is still finding this knowledge base's files in the vector DB; a file "
                               "not found yet cannot be told from an orphan. Try again when the index is ready.")
        journalled = file_id in journal_file_ids(await self._storage_keys(), kb_id)
        if file_id in state.known_files() and not journalled and not interrupted_in_langbot:
            raise ConsoleError("This file is ingested and searchable; delete it in LangBot instead. Only if "
                               "LangBot shows it as interrupted (and refuses to delete it), remove it here.")
        try:  # the same path as LangBot's delete: vectors, then record and journal entry
            await self.engine.delete_document(self.host, self.installation_id, kb_id, file_id)
        except LucidRagError as error:
            raise ConsoleError(f"{error}. Try again.") from error
        await forget_failure(self.host, kb_id, file_id)
        logger.info("kb=%s file=%s: removed from the console", kb_id, file_id)
        return {"removed": file_id}

    async def _retry_saving_records(self, kb_id: str) -> dict[str, Any]:
        state = await self._state(kb_id)
        pending = sorted(state.unsaved)
        await state.flush(KbStore(self.host, kb_id), time.monotonic() + REPAIR_BUDGET_S)
        return {"saved": [f for f in pending if f not in state.unsaved], "still_unsaved": sorted(state.unsaved)}

    async def _rebuild_from_vector_db(self, kb_id: str) -> dict[str, Any]:
        state = await self._state(kb_id)
        try:
            complete = await state.rebuild_from_vector_db(self.host, kb_id, time.monotonic() + REPAIR_BUDGET_S)
        except Exception as error:  # noqa: BLE001
            raise ConsoleError(f"The vector database could not be read: {describe(error)}. Try again.") from error
        return {"files": len(state.known_files()), "chunks": len(state.index), "complete": complete}


# ---------------------------------------------------------------------- views
def _pages(record: FileRecord) -> str:
    pages = sorted({c.page for c in record.chunks if c.page})
    if not pages:
        return ""
    return str(pages[0]) if len(pages) == 1 else f"{pages[0]}-{pages[-1]}"


def _file_row(record: FileRecord, status: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "file_id": record.file_id,
        "title": record.name or f"{(record.format or 'unknown').upper()} file",
        "format": record.format,
        "status": status,
        "chunks": len(record.chunks),
        "pages": _pages(record),
        "ocr": dict(record.ocr),
        "reason": "",
        "advice": "",
        "advice_key": "",
        "langbot_file": record.upload_key,  # the name LangBot's file list shows ("" in older records)
        "removal": "",  # LangBot deletes it; a file it shows as interrupted is removed apart from the rows
    }
    if status == "unsaved":
        row["reason"] = "Searchable, but its record could not be saved in plugin storage."
        row["advice"] = "Click 'Retry saving records'. Until then a plugin restart rebuilds it from the vector DB."
        row["advice_key"] = "unsaved"
    return row


def _interrupted(keys: list[str], kb_id: str, ingesting: set[str], failed: list[str]) -> list[str]:
    """Files whose ingest stopped while writing (LangBot shows them as interrupted): a journal entry
    and neither an ingest under way, a deletion or a commit whose entry waits for the next process
    (`ingesting`) nor a failure record (`failed`: a failed upload's entry waits for a
    reconciliation, and LangBot shows that file as failed)."""
    not_interrupted = ingesting | set(failed)
    return [f for f in journal_file_ids(keys, kb_id) if f not in not_interrupted]


def _interrupted_row(file_id: str) -> dict[str, Any]:
    return {"file_id": file_id, "title": "", "format": "", "status": "interrupted", "chunks": 0, "pages": "",
            "reason": "The plugin stopped while this file was being written (LangBot shows it as interrupted).",
            "advice": "Remove the vectors it left (button), then upload the file again. LangBot itself refuses "
            "to delete an interrupted file.", "advice_key": "interrupted", "langbot_file": "", "removal": "interrupted"}


def _failed_here_row(file_id: str) -> dict[str, Any]:
    """A file whose ingest never committed (a restart found it cut off) and whose vectors were removed."""
    return {"file_id": file_id, "title": "", "format": "", "status": "failed", "chunks": 0, "pages": "",
            "reason": "Its upload never finished (the plugin stopped while writing it); what it wrote was removed.",
            "advice": "Upload the file again.", "advice_key": "cut_off", "langbot_file": "", "removal": ""}


def _ingesting_row(file_id: str) -> dict[str, Any]:
    return {"file_id": file_id, "title": "", "format": "", "status": "ingesting", "chunks": 0, "pages": "",
            "reason": "", "advice": "", "advice_key": "", "langbot_file": "", "removal": ""}


def _failure_row(failure: FailureRecord) -> dict[str, Any]:
    key, advice = advice_for(failure.reason)
    return {
        "file_id": failure.file_id,
        "title": failure.document_name,
        "format": failure.format,
        "status": "failed",
        "chunks": 0,
        "pages": "",
        "reason": failure.reason,
        "advice": advice,
        "advice_key": key,
        "failed_at": failure.failed_at,
        "langbot_file": failure.upload_key,  # the name LangBot's file list shows for this upload
        "size": failure.size,
        "removal": "",  # no vectors; LangBot deletes a failed file itself
    }


def _health(state: KnowledgeBaseState, interrupted: list[str], failed: int) -> dict[str, Any]:
    return {
        "files": len(state.known_files()),
        "chunks": len(state.index),
        "keyword_index_chunks": len(state.index),
        "index_state": "rebuilding" if state.indexing else "ready" if state.known_files() else "empty",
        "files_to_index": len(state.to_index),
        "distance_metric": state.metric.value if state.metric else "",
        "unsaved_records": sorted(state.unsaved),
        "interrupted_files": interrupted,
        "failed_files": failed,
    }


def _problem(problem: SettingProblem) -> dict[str, Any]:
    return {"name": problem.name, "value": problem.value, "valid": problem.valid, "message": problem.message}


MODEL_SELECTORS = ("embedding-model-selector", "llm-model-selector", "rerank-model-selector")


def _settings_view(saved: Mapping[str, Any] | None, schema: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The creation settings, each with the label LangBot's form gave it (per language) and, for a
    choice, its option's label. A model is shown by LangBot's id of it: the SDK has no call that
    names an embedding or vision model (`get_llm_models` lists bare ids of chat models only)."""
    if saved is None:
        return {"known": False, "values": {}, "labels": {}, "problems": []}
    values = {**CREATION_DEFAULTS, **{k: v for k, v in saved.items() if v is not None}}
    fields = {str(f.get("name")): f for f in schema}
    labels: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        spec = fields.get(name)
        if spec is None:
            continue
        option = next((o for o in spec.get("options") or [] if o.get("name") == value), None)
        labels[name] = {"label": dict(spec.get("label") or {}),
                        "value_label": dict(option.get("label") or {}) if option else {},
                        "model_id": spec.get("type") in MODEL_SELECTORS}
    return {"known": True, "values": values, "labels": labels,
            "problems": [_problem(p) for p in creation_problems(saved)]}


def _hit_row(hit: Hit) -> dict[str, Any]:
    meta = hit.metadata()
    return {
        "file_id": hit.chunk.file_id,
        "document_name": meta["document_name"],
        "chunk_index": hit.chunk.index,
        "heading": hit.chunk.heading,
        "page": hit.chunk.page,
        "citation": citation(hit.format, hit.chunk.page),  # the title is beside it, the heading in the text
        "score": hit.score,  # as reported to the bot: never above the hit before it
        "fused_score": hit.fused_score,  # the passage's own, before the order capped it
        "vector_score": hit.vector_score,
        "keyword_score": hit.keyword_score,
        "text": hit.content[:PREVIEW_CHARS],
    }


def _number(value: Any, default: int, low: int, high: int) -> int:
    """A number of the page's request as an int in [low, high]: a number out of the range is
    clamped to it; what is not a finite number (null, a boolean, NaN, 1e400 -- JSON's reader
    makes it infinity --, text that is not an integer) gives `default`."""
    if isinstance(value, bool):
        return default
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:  # not an integer, or more digits than Python converts
            return default
    if isinstance(value, float):
        if not math.isfinite(value):
            return default
        value = int(value)
    if not isinstance(value, int):
        return default
    return min(high, max(low, value))


def _file_id(body: Mapping[str, Any]) -> str:
    """The request's file id ("": none given); a ConsoleError if it cannot be one (it would name
    another key)."""
    file_id = body.get("file_id")
    if file_id is None or file_id == "":
        return ""
    if not isinstance(file_id, str) or not is_file_id(file_id):
        raise ConsoleError(f"{str(file_id)[:80]!r} is not a file id: LucidRAG file ids contain no '/' or '#'. "
                           "Nothing was changed; choose the file from the console's list.")
    return file_id
