"""Shared fixtures: the real component wired to a contract-following fake host."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from langbot_plugin.api.entities.builtin.rag.context import RetrievalContext
from langbot_plugin.api.entities.builtin.rag.models import FileMetadata, FileObject, IngestionContext

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from components.knowledge_engine.lucid_rag import LucidRag  # noqa: E402
from lucidrag.engine import Engine  # noqa: E402
from tests.fakes import FakeHost  # noqa: E402

MODEL = "embed-model-1"


class FakePlugin(FakeHost):
    """The plugin object as the component sees it: the host API plus the plugin's engine."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.engine = Engine()


class Harness:
    def __init__(self, host: FakePlugin) -> None:
        self.host = host
        self.component = LucidRag()
        self.component.plugin = host  # type: ignore[assignment]

    async def ingest(self, kb_id: str, name: str, data: bytes, settings: dict[str, Any] | None = None,
                     document_id: str | None = None, mime_type: str = "", parsed: Any = None):
        document_id = document_id or str(uuid.uuid4())
        ext = name.rsplit(".", 1)[-1] if "." in name else ""
        storage_path = f"v1/{kb_id}/{uuid.uuid4().hex}.{ext}" if ext else f"v1/{kb_id}/{uuid.uuid4().hex}"
        self.host.files[storage_path] = data
        context = IngestionContext(
            file_object=FileObject(
                metadata=FileMetadata(filename=storage_path, file_size=len(data), mime_type=mime_type,
                                      document_id=document_id, knowledge_base_id=kb_id),
                storage_path=storage_path,
            ),
            knowledge_base_id=kb_id,
            collection_id=kb_id,
            creation_settings={"embedding_model_uuid": MODEL, **(settings or {})},
            parsed_content=parsed,
        )
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

    async def texts(self, kb_id: str, query: str, **kwargs: Any) -> list[str]:
        response = await self.retrieve(kb_id, query, **kwargs)
        return [entry.content[0].text for entry in response.results]


@pytest.fixture
def host() -> FakePlugin:
    return FakePlugin()


@pytest.fixture
def harness(host: FakePlugin) -> Harness:
    return Harness(host)
