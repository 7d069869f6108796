"""The agent's tools (LangBot Tool components): a thin adapter between a tool call and
lucidrag/agent. Each call gets the calling query's reference from the host (`query_id`, and
`query_uuid` since SDK 0.7.18 passes it to a `call` that declares it); that reference is the only
source of scope (lucidrag/agent/scope.py). Nothing is kept on the component: one object serves
every installation of a shared runtime, told apart by the invocation's binding.

The error boundary of a tool call: whatever happens, the model gets a text it can read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from langbot_plugin.api.definition.components.tool.tool import Tool
from langbot_plugin.api.entities.builtin.provider.session import Session
from langbot_plugin.entities.io.actions.enums import PluginToRuntimeAction

from components.knowledge_engine.lucid_rag import DEFAULT_INSTALLATION
from lucidrag.agent.kbtools import AgentTools
from lucidrag.agent.output import refusal
from lucidrag.base.budget import remaining

logger = logging.getLogger(__name__)

# LIST_PIPELINE_KNOWLEDGE_BASES is a few database reads on the host. A retrieve reaches LucidRAG's
# own retrieve hook, which may take the runtime's 120 s (budget.py); the tool call itself has 180 s.
LIST_TIMEOUT_S = 15.0
RETRIEVE_TIMEOUT_S = 125.0
FAILED = "The knowledge base tool failed unexpectedly; answer without it."


class QueryActions:
    """LangBot's actions for the calling query (what the SDK's QueryBasedAPIProxy sends, with
    timeouts that fit a retrieve)."""

    def __init__(self, handler: Any, query_id: Any, query_uuid: Any) -> None:
        self._handler = handler
        self._ref: dict[str, Any] = {"query_id": query_id}
        if query_uuid is not None:
            self._ref["query_uuid"] = query_uuid

    async def pipeline_knowledge_bases(self) -> list[Any]:
        data = await self._handler.call_action(PluginToRuntimeAction.LIST_PIPELINE_KNOWLEDGE_BASES, dict(self._ref),
                                               timeout=LIST_TIMEOUT_S)
        return data["knowledge_bases"]

    async def retrieve(self, kb_id: str, query: str, top_k: int, filters: dict[str, Any] | None) -> list[Any]:
        data = await self._handler.call_action(
            PluginToRuntimeAction.RETRIEVE_KNOWLEDGE_BASE,
            {**self._ref, "kb_id": kb_id, "query_text": query, "top_k": top_k, "filters": filters or {}},
            timeout=max(1.0, min(RETRIEVE_TIMEOUT_S, remaining())))
        return data["results"]


class KnowledgeBaseTool(Tool):
    operation = ""  # the AgentTools method this tool runs

    async def call(self, params: dict[str, Any], session: Session, query_id: int,
                   query_uuid: str | None = None) -> dict[str, Any]:  # type: ignore[override]
        try:
            binding = self.get_installation_binding()
            tools = AgentTools(self.plugin, self.plugin.engine,  # type: ignore[arg-type, attr-defined]
                               str(getattr(binding, "installation_uuid", "") or DEFAULT_INSTALLATION),
                               QueryActions(self.plugin.plugin_runtime_handler, query_id, query_uuid),
                               query_id, query_uuid)
            run = getattr(tools, self.operation)
            return await run(params if isinstance(params, Mapping) else {})
        except Exception:  # noqa: BLE001 - the model gets an answer, the host no exception
            logger.exception("tool %s failed", self.operation)
            return refusal(FAILED)


class SearchKnowledgeBase(KnowledgeBaseTool):
    operation = "search"


class ListKnowledgeBaseFiles(KnowledgeBaseTool):
    operation = "list_files"


class ReadAroundPassage(KnowledgeBaseTool):
    operation = "read_around"
