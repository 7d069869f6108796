"""Shared fixtures: the real component, driven the way `lbp run` drives it, on a contract-following
fake host.

As in the real plugin process (SDK 0.7.18): every test's event loop has the SDK's bounded default
executor installed (8 workers, at most 4 blocking jobs in flight per workspace; a 5th
`asyncio.to_thread` in one workspace raises BlockingWorkCapacityError), and the Harness runs each
component hook inside `blocking_work_scope(workspace)` and a real `bind_invocation`, so a host call
made after the hook returned is refused with RuntimeError('Plugin invocation has ended').
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest
from langbot_plugin.api.definition.components.tool.tool import Tool
from langbot_plugin.api.entities.builtin.provider.session import Session
from langbot_plugin.api.entities.builtin.rag.context import (
    RetrievalContext,
    RetrievalResponse,
)
from langbot_plugin.api.entities.builtin.rag.models import (
    IngestionContext,
    IngestionResult,
)
from langbot_plugin.api.proxies.invocation import bind_invocation
from langbot_plugin.runtime.bounded_executor import (
    blocking_work_scope,
    configure_bounded_default_executor,
)

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import lucidrag.base.host  # noqa: E402
import lucidrag.engine  # noqa: E402
import lucidrag.state.lifecycle  # noqa: E402
from lucidrag.index import segindex  # noqa: E402
from components.knowledge_engine.lucid_rag import LucidRag  # noqa: E402
from lucidrag.engine import Engine  # noqa: E402
from tests.fakes import FakeHost, HostKnowledgeBase, QueryScopedActions, ingestion_context  # noqa: E402

MODEL = "embed-model-1"
WORKSPACE = "workspace-1"
T = TypeVar("T")


def runtime_loop() -> asyncio.AbstractEventLoop:
    """A new event loop with the executor `lbp run` installs (SDK defaults)."""
    loop = asyncio.new_event_loop()
    configure_bounded_default_executor(loop)
    return loop


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    return {"lbp-run": runtime_loop}


@pytest.fixture(autouse=True)
def no_retry_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Transient host errors are still retried, without the production back-off delays."""
    monkeypatch.setattr(lucidrag.base.host, "RETRY_DELAYS", (0.0, 0.0, 0.0))


@pytest.fixture(autouse=True)
def previous_process_calls_landed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A FakeHost call is done when it returns, and a test that holds one back lets it land
    before it restarts the plugin: no call of the previous process is in flight after a restart,
    and no write the plugin gave up on lands later unless the test says when (it sets the window).
    (tests/sim models the window: its calls land up to twice the SDK's timeout later.)"""
    if "sim" not in request.path.parts:
        monkeypatch.setattr(lucidrag.engine, "PREVIOUS_PROCESS_LANDING_S", 0.0)
        monkeypatch.setattr(lucidrag.state.lifecycle, "PREVIOUS_PROCESS_LANDING_S", 0.0)


class FakePlugin(FakeHost):
    """The plugin object as the component sees it: the host API plus the plugin's engine."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.engine = Engine()


class HostedComponent:
    """The component's hooks, each called as the SDK's handler calls an action."""

    def __init__(self, harness: Harness) -> None:
        self._harness = harness
        self._component = harness.lucid

    async def ingest(self, context: IngestionContext) -> IngestionResult:
        return await self._harness.invoke(self._component.ingest, context)

    async def retrieve(self, context: RetrievalContext) -> RetrievalResponse:
        return await self._harness.invoke(self._component.retrieve, context)

    async def delete_document(self, kb_id: str, document_id: str) -> bool:
        return await self._harness.invoke(self._component.delete_document, kb_id, document_id)

    async def on_knowledge_base_create(self, kb_id: str, config: dict) -> None:
        return await self._harness.invoke(self._component.on_knowledge_base_create, kb_id, config)

    async def on_knowledge_base_delete(self, kb_id: str) -> None:
        """As LangBot does: the hook (30 s), then the KB's row goes, whatever the hook did."""
        try:
            return await asyncio.wait_for(self._harness.invoke(self._component.on_knowledge_base_delete, kb_id), 30)
        finally:
            self._harness.host.deleted_kbs.add(kb_id)


class Harness:
    def __init__(self, host: FakePlugin, workspace: str = WORKSPACE, binding: Any = None) -> None:
        self.host = host
        self.workspace = workspace
        self.binding = binding  # an InstallationBinding; None → the "dedicated" installation
        self.lucid = LucidRag()
        self.lucid.plugin = host  # type: ignore[assignment]
        self.component = HostedComponent(self)

    async def invoke(self, hook: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Like runtime/io/handler.py: action_invocation_scope → blocking_work_scope → the hook.
        When the hook returns, the invocation ends for every task it started too."""
        with bind_invocation(self.host.plugin_runtime_handler, config={}, binding=self.binding):
            with blocking_work_scope(self.workspace):
                return await hook(*args)

    async def create(self, kb_id: str, settings: dict[str, Any] | None = None) -> None:
        """The KB's creation hook, as LangBot calls it before the KB's first upload."""
        await self.component.on_knowledge_base_create(kb_id, {"embedding_model_uuid": MODEL, **(settings or {})})

    async def ingest(self, kb_id: str, name: str, data: bytes, settings: dict[str, Any] | None = None,
                     document_id: str | None = None, mime_type: str = "", parsed: Any = None):
        document_id = document_id or str(uuid.uuid4())
        ext = name.rsplit(".", 1)[-1] if "." in name else ""
        storage_path = f"v1/{kb_id}/{uuid.uuid4().hex}.{ext}" if ext else f"v1/{kb_id}/{uuid.uuid4().hex}"
        self.host.files[storage_path] = data
        context = ingestion_context(kb_id, storage_path, data, document_id,
                                    {"embedding_model_uuid": MODEL, **(settings or {})}, mime_type, parsed)
        return await self.component.ingest(context)

    async def retrieve(self, kb_id: str, query: str, settings: dict[str, Any] | None = None,
                       filters: dict[str, Any] | None = None, creation: dict[str, Any] | None = None):
        context = RetrievalContext(
            query=query, knowledge_base_id=kb_id, collection_id=kb_id,
            retrieval_settings={"top_k": 5, **(settings or {})},
            creation_settings={"embedding_model_uuid": MODEL, **(creation or {})},
            filters=filters or {},
        )
        return await self.component.retrieve(context)

    def knowledge_base_in_langbot(self, kb_id: str, name: str, retrieval_settings: dict[str, Any] | None = None,
                                  workspace: str | None = None) -> HostKnowledgeBase:
        """LangBot's row of this installation's KB `kb_id`: what its query-scoped actions answer
        (fakes.QueryScopedActions), retrieving through this installation's retrieve hook."""
        if self.host.queries is None:
            self.host.queries = QueryScopedActions()
        workspace = workspace or getattr(self.binding, "workspace_uuid", None) or WORKSPACE
        return self.host.queries.add_knowledge_base(HostKnowledgeBase(
            kb_id, name, workspace, retrieval_settings=dict(retrieval_settings or {}),
            creation_settings={"embedding_model_uuid": MODEL}, engine=self.component.retrieve))

    async def call_tool(self, tool: Tool, params: Any, query_id: Any, query_uuid: str | None = None) -> Any:
        """As the SDK's CALL_TOOL handler calls a tool (cli/run/handler.py): a Session, the query
        reference (`query_uuid` only to a `call` that declares it), in this installation's invocation."""
        tool.plugin = self.host  # type: ignore[assignment]
        session = Session.model_validate({"launcher_type": "person", "launcher_id": "user-1"})
        kwargs: dict[str, Any] = {"session": session, "query_id": query_id}
        if "query_uuid" in inspect.signature(tool.call).parameters:
            kwargs["query_uuid"] = query_uuid
        return await self.invoke(lambda: tool.call(params, **kwargs))

    async def texts(self, kb_id: str, query: str, **kwargs: Any) -> list[str]:
        response = await self.retrieve(kb_id, query, **kwargs)
        return [entry.content[0].text for entry in response.results]


@pytest.fixture
def host() -> FakePlugin:
    return FakePlugin()


@pytest.fixture
def harness(host: FakePlugin) -> Harness:
    return Harness(host)


@pytest.fixture
def persist_every_segment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every keyword-index segment persisted as soon as it is built, for tests of the snapshot's
    mechanics on a few small files (production keeps segments below segindex.PERSIST_POSTINGS in
    memory only, and indexes their files from the records after a restart)."""
    monkeypatch.setattr(segindex, "PERSIST_POSTINGS", 0)
