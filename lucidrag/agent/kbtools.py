"""The three things an agent may do with the knowledge bases its pipeline uses: search (with a
file, format and page range), list the files, read the passages around a passage. Read-only.

Searches go through LangBot's query-scoped retrieve, so the host checks the KB against the
calling query's set a second time and applies the KB's own retrieval settings (threshold,
context window, source line), exactly as for the answer's automatic retrieval. File lists and
the text around a passage are read here, from this installation's state of an allowed KB only.
Every id the model sends back is looked up again inside the allowed set: an id of any other KB
gets the same answer as one that never existed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from lucidrag.agent.output import (
    Passage,
    answer,
    parse_passage_id,
    passage,
    passage_from_result,
    refusal,
)
from lucidrag.agent.params import around_request, list_request, search_filter, search_request
from lucidrag.agent.scope import (
    KbRef,
    QueryHost,
    ToolRefusal,
    allowed_knowledge_bases,
    chosen,
    has_query,
    names,
    NO_KNOWLEDGE_BASE,
)
from lucidrag.base.budget import hook_budget
from lucidrag.base.host import HostApi, describe
from lucidrag.engine import Engine
from lucidrag.state.kbstate import KnowledgeBaseState
from lucidrag.state.records import FileRecord

logger = logging.getLogger(__name__)

NAME_SCAN_FILES = 500  # records a file name is looked for in, per KB (a KB may hold 50,000 files)
MAX_NAMED_FILES = 20  # files one `file` value may select
PASSAGE_NOT_FOUND = ("No such passage in the knowledge bases you may use here. Pass an `id` exactly as "
                     "lucidrag_search returned it.")
NO_FILE = ("No file matching {file} in {kbs}. Call lucidrag_list_files to see the files, then pass a "
           "`file_id` or a title from it.")
T = TypeVar("T")


@dataclass(frozen=True)
class FileRow:
    file_id: str
    title: str
    format: str
    pages: int | None
    chunks: int

    def row(self) -> dict[str, Any]:
        row: dict[str, Any] = {"file_id": self.file_id, "title": self.title, "format": self.format}
        if self.pages:
            row["pages"] = self.pages
        row["chunks"] = self.chunks
        row["status"] = "ready"
        return row


def file_row(record: FileRecord) -> FileRow:
    pages = max((c.page or 0 for c in record.chunks), default=0)
    return FileRow(record.file_id, title_of(record), record.format, pages or None, len(record.chunks))


def title_of(record: FileRecord) -> str:
    return record.name or record.upload_key or f"{(record.format or 'unknown').upper()} file"


class AgentTools:
    """One tool call: its host, this installation's engine and the calling query's host actions."""

    def __init__(self, host: HostApi, engine: Engine, installation_id: str, query_host: QueryHost,
                 query_id: Any, query_uuid: Any) -> None:
        self.host = host
        self.engine = engine
        self.installation_id = installation_id
        self.query_host = query_host
        self.with_query = has_query(query_id, query_uuid)

    async def search(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return await self._answer(self._search, params)

    async def list_files(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return await self._answer(self._list_files, params)

    async def read_around(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return await self._answer(self._read_around, params)

    async def _answer(self, run: Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]],
                      params: Mapping[str, Any]) -> dict[str, Any]:
        try:
            with hook_budget("tool"):
                return await run(params if isinstance(params, Mapping) else {})
        except ToolRefusal as refused:
            return refusal(str(refused))

    async def _allowed(self) -> list[KbRef]:
        if not self.with_query:  # a run an event started, or a call outside any pipeline query
            raise ToolRefusal(NO_KNOWLEDGE_BASE)
        return await allowed_knowledge_bases(self.query_host, self.host, self.engine.installation(self.installation_id))

    async def _read(self, kb: KbRef, read: Callable[[KnowledgeBaseState], Awaitable[T]]) -> T:
        return await self.engine.read_kb(self.host, self.installation_id, kb.kb_id, read)

    # ------------------------------------------------------------------ search
    async def _search(self, params: Mapping[str, Any]) -> dict[str, Any]:
        request = search_request(params)
        kbs = chosen(await self._allowed(), request.knowledge_base)
        targets: list[tuple[KbRef, dict[str, Any] | None, list[str]]] = []
        for kb in kbs:
            files: dict[str, str] = {}
            if request.file:
                files = await self._read(kb, lambda state: self._files_named(state, request.file))
                if not files:
                    continue
            where = search_filter(sorted(files), request.format, request.page_from, request.page_to)
            targets.append((kb, where, sorted(set(files.values()))))
        if not targets:
            raise ToolRefusal(NO_FILE.format(file=_quoted(request.file), kbs=names(kbs)))
        found = await asyncio.gather(*(self._search_one(kb, request.query, request.top_k, where)
                                       for kb, where, _ in targets))
        passages = sorted((p for hits, _ in found for p in hits),
                          key=lambda p: p.score if p.score is not None else 0.0, reverse=True)[: request.top_k]
        notes = [note for _, note in found if note]
        if not passages:
            notes.append("No passage matched. Try other words, or fewer filters.")
            if request.page_from is not None or request.page_to is not None:
                notes.append("A page range leaves out files without page numbers (only PDFs and similar have them).")
        fields: dict[str, Any] = {"searched": [kb.label for kb, _, _ in targets]}
        applied = _filter_view(sorted({t for _, _, titles in targets for t in titles}), request.format,
                               request.page_from, request.page_to)
        if applied:
            fields["filter"] = applied
        return answer(fields, [p.row() for p in passages], "passages", " ".join(notes))

    async def _search_one(self, kb: KbRef, query: str, top_k: int,
                          where: dict[str, Any] | None) -> tuple[list[Passage], str]:
        try:
            results = await self.query_host.retrieve(kb.kb_id, query, top_k, where)
        except Exception as error:  # noqa: BLE001 - the other KBs still answer
            logger.warning("tool: kb=%s: search failed (%s)", kb.kb_id, describe(error))
            return [], f"{kb.label} could not be searched now; try again later."
        hits = [passage_from_result(kb.kb_id, r) for r in results if isinstance(r, Mapping)]
        return [h for h in hits if h is not None], ""

    async def _files_named(self, state: KnowledgeBaseState, wanted: str) -> dict[str, str]:
        """file id -> title of the files `wanted` names: its id (one record read), else a title or
        upload name equal to it, else containing it (ignoring case; the first NAME_SCAN_FILES)."""
        answers = [f for f in state.known_files() if f not in state.unsettled]
        if wanted in answers:
            record = (await state.file_records(self.host, state.kb_id, [wanted])).get(wanted)
            return {wanted: title_of(record) if record else wanted}
        records = await state.file_records(self.host, state.kb_id, sorted(answers)[:NAME_SCAN_FILES])
        key = wanted.casefold()
        equal = {f: title_of(r) for f, r in records.items() if key in (r.name.casefold(), r.upload_key.casefold())}
        if equal:
            return dict(sorted(equal.items())[:MAX_NAMED_FILES])
        containing = {f: title_of(r) for f, r in records.items()
                      if key in r.name.casefold() or key in r.upload_key.casefold()}
        return dict(sorted(containing.items())[:MAX_NAMED_FILES])

    # ------------------------------------------------------------------ list files
    async def _list_files(self, params: Mapping[str, Any]) -> dict[str, Any]:
        request = list_request(params)
        kbs = chosen(await self._allowed(), request.knowledge_base)
        summaries: list[dict[str, Any]] = []
        rows: list[dict[str, Any]] = []
        notes: list[str] = []
        for kb in kbs:
            listed, total, processing = await self._read(kb, lambda state: self._files_of(state, request.name_contains))
            summaries.append({"name": kb.label, "files": total} | ({"processing": processing} if processing else {}))
            if total > NAME_SCAN_FILES:
                notes.append(f"{kb.label}: only the first {NAME_SCAN_FILES} of {total} files were looked at.")
            for file in listed:
                rows.append(file.row() | ({"knowledge_base": kb.label} if len(kbs) > 1 else {}))
        shown = rows[: request.limit]
        if len(rows) > len(shown):
            notes.append(f"{len(rows) - len(shown)} more files match; pass name_contains or a larger limit.")
        if not rows:
            notes.append("No file matches." if request.name_contains else "No file is ready yet.")
        return answer({"knowledge_bases": summaries}, shown, "files", " ".join(notes))

    async def _files_of(self, state: KnowledgeBaseState, name_contains: str) -> tuple[list[FileRow], int, int]:
        """The files ready to search (the first NAME_SCAN_FILES by id, matching `name_contains`)
        by title, how many are ready in all, and how many are being added now."""
        answers = sorted(f for f in state.known_files() if f not in state.unsettled)
        records = await state.file_records(self.host, state.kb_id, answers[:NAME_SCAN_FILES])
        key = name_contains.casefold()
        listed = [file_row(r) for r in records.values()
                  if not key or key in r.name.casefold() or key in r.upload_key.casefold()]
        return sorted(listed, key=lambda f: (f.title.casefold(), f.file_id)), len(answers), len(state.in_flight)

    # ------------------------------------------------------------------ read around
    async def _read_around(self, params: Mapping[str, Any]) -> dict[str, Any]:
        request = around_request(params)
        parsed = parse_passage_id(request.passage_id)
        if parsed is None:
            raise ToolRefusal(PASSAGE_NOT_FOUND)
        kb_id, file_id, index = parsed
        kb = next((r for r in await self._allowed() if r.kb_id == kb_id), None)
        if kb is None:
            raise ToolRefusal(PASSAGE_NOT_FOUND)

        async def read(state: KnowledgeBaseState) -> FileRecord | None:
            if file_id not in state.known_files() or file_id in state.unsettled:
                return None
            return (await state.file_records(self.host, kb_id, [file_id])).get(file_id)

        record = await self._read(kb, read)
        chunks = [c for c in record.chunks if index - request.before <= c.index <= index + request.after] \
            if record is not None else []
        if record is None or not any(c.index == index for c in chunks):
            raise ToolRefusal(PASSAGE_NOT_FOUND)
        rows = [passage(kb_id, file_id, c.index, c.text, c.document_name, c.heading, c.page).row() for c in chunks]
        return answer({"knowledge_base": kb.label, "file": title_of(record)}, rows, "passages")


def _filter_view(titles: list[str], file_format: str, page_from: int | None, page_to: int | None) -> dict[str, Any]:
    """The filter as the model asked for it, to show what the passages were limited to."""
    view: dict[str, Any] = {}
    if titles:
        view["files"] = titles
    if file_format:
        view["format"] = file_format
    if page_from is not None or page_to is not None:
        view["pages"] = f"{page_from or 1}-{page_to if page_to is not None else ''}"
    return view


def _quoted(value: str) -> str:
    return f'"{value[:100]}"'
