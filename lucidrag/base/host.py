"""The part of the LangBot host API that LucidRAG uses, as a Protocol, plus error classification.

Signatures are copied from `langbot_plugin/api/proxies/langbot_api.py` (SDK 0.7.x); the plugin object
itself satisfies this Protocol, and so does `tests/fakes.py`. Only `ingest.py`, `retrieve.py`,
`store.py` and `engine.py` talk to the host, and only through this type.

Retries live here too (`with_retries`): a host call is retried only when its failure is transient
(timeout, rate limit, 5xx). A lost connection to LangBot is not retried: the SDK marks the
connection closed for good and LangBot has already given up on the action, so it surfaces at once
as `HostConnectionLost`, whose message blames LangBot's connection, not the model or the database.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from lucidrag.base.budget import bounded, remaining
from lucidrag.base.errors import HostConnectionLost

logger = logging.getLogger(__name__)
T = TypeVar("T")


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

    async def invoke_llm(
        self,
        llm_model_uuid: str,
        messages: list[Any],
        funcs: list[Any] = [],  # noqa: B006 - the SDK's signature
        extra_args: dict[str, Any] = {},  # noqa: B006
        timeout: float | None = None,
    ) -> Any: ...  # a provider Message

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


RETRY_DELAYS: tuple[float, ...] = (0.5, 2.0, 5.0)  # read at call time, so tests can shorten it

# What the SDK raises for a dead connection (langbot_plugin/entities/io/errors.py), and what the
# plugin's proxies raise once the runtime handler is gone (HOST_CONTRACT.md).
_CONNECTION_LOST_NAMES = frozenset({"ConnectionClosedError"})
_CONNECTION_LOST_WORDS = ("connectionclosederror", "'nonetype' object has no attribute 'call_action'")
_TRANSIENT_NAMES = frozenset(
    {"ActionCallTimeoutError", "TimeoutError", "ConnectionError", "ConnectionResetError",
     "ConnectionRefusedError", "BrokenPipeError"}
)
# Raw provider texts (older hosts pass them through) and LangBot 4.11's RequesterError summaries,
# which hide the status code and are translated into the host's UI language (pkg/i18n/locales):
# "Model request failed: Rate limit exceeded or insufficient balance" (429), "Request timed out",
# "Connection failed", "Unknown error" (500, 502, 503: litellm's InternalServerError,
# BadGatewayError, ServiceUnavailableError). Its "API error" is not here: litellm raises a bare
# APIError for unmapped statuses such as TEI's 413 "batch too large" (see embedding.py).
# Status codes only as whole words: the host's messages carry model UUIDs.
_LANGBOT_TRANSIENT = (
    # Rate limit exceeded or insufficient balance
    "请求过于频繁", "請求過於頻繁", "リクエスト制限を超えた", "límite de solicitudes excedido",
    "превышен лимит запросов", "เกินขีดจำกัดคำขอ", "vượt giới hạn yêu cầu",
    # Request timed out
    "请求超时", "請求逾時", "リクエストがタイムアウトしました", "la solicitud agotó el tiempo de espera",
    "время ожидания запроса истекло", "คำขอหมดเวลา", "yêu cầu đã hết thời gian chờ",
    # Connection failed
    "连接失败", "連線失敗", "接続に失敗しました", "error de conexión", "ошибка подключения",
    "การเชื่อมต่อล้มเหลว", "kết nối thất bại",
    # Unknown error
    "未知错误", "未知錯誤", "不明なエラー", "error desconocido", "неизвестная ошибка",
    "ข้อผิดพลาดที่ไม่ทราบสาเหตุ", "lỗi không xác định",
)
_TRANSIENT = re.compile(
    r"\b(?:429|500|502|503|504)\b|timeout|timed out|rate limit|too many requests|temporarily|"
    r"overloaded|service unavailable|bad gateway|connection reset|try again|connection failed|"
    r"unknown error|" + "|".join(re.escape(word) for word in _LANGBOT_TRANSIENT),
    re.IGNORECASE,
)


def is_connection_lost(error: BaseException) -> bool:
    """True when the plugin's connection to LangBot is gone (LangBot restarted, `lbp run` lost it)."""
    if isinstance(error, HostConnectionLost):
        return True
    if any(cls.__name__ in _CONNECTION_LOST_NAMES for cls in type(error).__mro__):
        return True
    message = str(error).lower()
    return any(word in message for word in _CONNECTION_LOST_WORDS)


def is_transient(error: BaseException) -> bool:
    """True for failures worth retrying: timeouts, rate limits, overloaded or failing upstreams."""
    if is_connection_lost(error):
        return False
    if isinstance(error, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    if any(cls.__name__ in _TRANSIENT_NAMES for cls in type(error).__mro__):
        return True
    return _TRANSIENT.search(str(error)) is not None


def is_kb_gone(error: BaseException) -> bool:
    """LangBot deletes a KB's row right after `on_knowledge_base_delete` returns; every vector call
    for it is then refused with "Knowledge base not found" (pkg/rag/service/runtime.py)."""
    return "knowledge base not found" in str(error).lower()


def connection_lost(error: BaseException) -> HostConnectionLost:
    return HostConnectionLost(
        f"The connection to LangBot was lost ({describe(error)}). "
        "LangBot probably restarted or the plugin was disconnected; once LangBot is running again, "
        "upload the file again."
    )


async def with_retries(call: Callable[[], Awaitable[T]], delays: Sequence[float] | None = None) -> T:
    """Run a host call, retrying transient failures after each delay (with jitter), within the
    current hook's deadline (budget.py): no attempt runs past it, no retry waits beyond it.

    A lost connection raises `HostConnectionLost` at once; other errors propagate unchanged."""
    schedule = RETRY_DELAYS if delays is None else delays
    for attempt in range(len(schedule) + 1):
        try:
            return await bounded(call)
        except Exception as error:  # noqa: BLE001 - classified below, re-raised when not transient
            if is_connection_lost(error):
                raise connection_lost(error) from error
            if attempt == len(schedule) or not is_transient(error):
                raise
            delay = schedule[attempt] * random.uniform(0.8, 1.2)
            if delay >= remaining():
                raise
            logger.warning("transient host error, retrying in %.1fs: %s", delay, describe(error))
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


def describe(error: BaseException) -> str:
    """A short, single-line description of a host error for user-facing messages."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."
