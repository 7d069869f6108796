"""The part of the LangBot host API that LucidRAG uses, as a Protocol, plus error classification.

Signatures are copied from `langbot_plugin/api/proxies/langbot_api.py` (SDK 0.7.x); the plugin object
itself satisfies this Protocol, and so does `tests/fakes.py`. Only `ingest.py`, `retrieve.py`,
`store.py` and `engine.py` talk to the host, and only through this type.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol


class HostApi(Protocol):
    async def invoke_embedding(self, embedding_model_uuid: str, texts: list[str]) -> list[list[float]]: ...

    async def invoke_rerank(
        self,
        rerank_model_uuid: str,
        query: str,
        documents: list[str],
        top_k: int | None = None,
        extra_args: dict[str, Any] | None = None,
        timeout: float = 60.0,
    ) -> list[dict[str, Any]]: ...

    async def vector_upsert(
        self,
        collection_id: str,
        vectors: list[list[float]],
        ids: list[str],
        metadata: list[dict[str, Any]] | None = None,
        documents: list[str] | None = None,
    ) -> None: ...

    async def vector_search(
        self,
        collection_id: str,
        query_vector: list[float],
        top_k: int = 5,
        filters: dict[str, Any] | None = None,
        search_type: str = "vector",
        query_text: str = "",
        vector_weight: float | None = None,
    ) -> list[dict[str, Any]]: ...

    async def vector_delete(
        self,
        collection_id: str,
        file_ids: list[str] | None = None,
        filters: dict[str, Any] | None = None,
    ) -> int: ...

    async def vector_list(
        self,
        collection_id: str,
        filters: dict[str, Any] | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> dict[str, Any]: ...

    async def get_knowledge_file_stream(self, storage_path: str) -> bytes: ...

    async def set_plugin_storage(self, key: str, value: bytes) -> None: ...

    async def get_plugin_storage(self, key: str) -> bytes: ...

    async def get_plugin_storage_keys(self) -> list[str]: ...

    async def delete_plugin_storage(self, key: str) -> None: ...


_TRANSIENT_NAMES = frozenset(
    {"ActionCallTimeoutError", "ConnectionClosedError", "TimeoutError", "ConnectionError",
     "ConnectionResetError", "ConnectionRefusedError", "BrokenPipeError"}
)
_TRANSIENT_WORDS = ("timeout", "timed out", "rate limit", "429", "503", "502", "504",
                    "temporarily", "overloaded", "connection reset", "try again")


def is_transient(error: BaseException) -> bool:
    """True for failures worth retrying: timeouts, dropped connections, rate limits."""
    if isinstance(error, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    if any(cls.__name__ in _TRANSIENT_NAMES for cls in type(error).__mro__):
        return True
    message = str(error).lower()
    return any(word in message for word in _TRANSIENT_WORDS)


def describe(error: BaseException) -> str:
    """A short, single-line description of a host error for user-facing messages."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."
