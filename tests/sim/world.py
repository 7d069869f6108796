"""The simulated LangBot host of the seeded histories: one host (a contract-following FakeHost:
its plugin storage and vector DB outlive plugin processes) and the plugin processes over it.

A `PluginProcess` is what the component sees as `self.plugin`: the host API plus an Engine of its
own. Every host call of a process goes through `_host`, which
- waits a seeded jitter of 0-8 event-loop turns (virtual time), so that concurrent hooks interleave
  differently per seed but reproducibly;
- fails plugin-storage reads, writes, deletes and key listings, and vector calls, on the seeded
  fault schedule of the moment (`Faults`), and loses the answer of vector calls the host did (the
  SDK's call timeout running out after LangBot finished: the plugin gets ActionCallTimeoutError);
- models kill -9: once the process is killed, none of its host calls ever returns to it (they
  raise `Killed`, a BaseException the plugin cannot catch by accident); the call that kills it
  may or may not have reached the host (a seeded coin).

Worker threads are replaced by inline calls (`inline_blocking`) so that a seed replays exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Iterator
from typing import Any

from lucidrag.base import blocking
from lucidrag.engine import Engine
from tests.fakes import ActionCallTimeoutError, FakeHost, HostError, hash_embed

SIM_DIM = 256  # != Milvus' default 1536: a collection created by touching it refuses our vectors
MAX_JITTER_TURNS = 8

STORAGE_METHODS = frozenset({"get_plugin_storage", "set_plugin_storage", "delete_plugin_storage",
                             "get_plugin_storage_keys"})
VECTOR_METHODS = frozenset({"vector_upsert", "vector_search", "vector_delete", "vector_list"})
BACKENDS = ("chroma", "milvus", "pgvector")


class Killed(BaseException):
    """The plugin process was killed (kill -9): this host call never returns to it."""


def sim_embed(text: str) -> list[float]:
    return hash_embed(text, SIM_DIM)


def make_host(backend: str) -> FakeHost:
    if backend == "milvus":
        return FakeHost.milvus(embed=sim_embed)
    if backend == "pgvector":
        return FakeHost.pgvector(embed=sim_embed)
    return FakeHost(embed=sim_embed)


class Faults:
    """The failure rates of the moment; each call draws from the history's seeded stream."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.storage = 0.0
        self.vectors = 0.0
        self.lost = 0.0  # vector calls the host does, whose answer never comes back

    def check(self, method: str) -> bool:
        """Raises for a call the host refuses; True for one whose answer is to be lost after it."""
        rate = self.storage if method in STORAGE_METHODS else self.vectors if method in VECTOR_METHODS else 0.0
        if rate and self.rng.random() < rate:
            # storage errors are not transient; vector errors sometimes are (then retried)
            transient = method in VECTOR_METHODS and self.rng.random() < 0.5
            raise HostError(f"{method}: {'503 Unknown error' if transient else 'simulated failure'}")
        return bool(method in VECTOR_METHODS and self.lost and self.rng.random() < self.lost)


class PluginProcess:
    """One plugin process over the shared host: the host API as the component calls it, its own
    Engine, and a kill switch."""

    def __init__(self, host: FakeHost, faults: Faults, rng: random.Random, kb_id: str) -> None:
        self.host = host
        self.faults = faults
        self.rng = rng
        self.kb_id = kb_id
        self.engine = Engine()
        self.dead = False
        self.kill_after: int | None = None  # host calls until kill -9 (None: never)
        self.plugin_runtime_handler = host.plugin_runtime_handler

    def kill(self) -> None:
        self.dead = True

    async def _host(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self.dead:
            raise Killed()
        for _ in range(self.rng.randint(0, MAX_JITTER_TURNS)):
            await asyncio.sleep(0)
        if self.dead:
            raise Killed()
        call: Callable[..., Any] = getattr(self.host, method)
        if self.kill_after is not None:
            self.kill_after -= 1
            if self.kill_after <= 0:
                self.dead = True
                if self.rng.random() < 0.5:  # the host did it; the answer never came back
                    with contextlib.suppress(Exception):
                        await call(*args, **kwargs)
                raise Killed()
        answer_lost = self.faults.check(method)
        result = await call(*args, **kwargs)
        if self.dead:
            raise Killed()
        if answer_lost:
            raise ActionCallTimeoutError(f"{method}: the action call timed out")
        return result

    # ---------------------------------------------------------------- the SDK's host API
    async def invoke_embedding(self, embedding_model_uuid: str, texts: list[str]) -> list[list[float]]:
        return await self._host("invoke_embedding", embedding_model_uuid, texts)

    async def invoke_rerank(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return await self._host("invoke_rerank", *args, **kwargs)

    async def vector_upsert(self, *args: Any, **kwargs: Any) -> None:
        return await self._host("vector_upsert", *args, **kwargs)

    async def vector_search(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return await self._host("vector_search", *args, **kwargs)

    async def vector_delete(self, *args: Any, **kwargs: Any) -> int:
        return await self._host("vector_delete", *args, **kwargs)

    async def vector_list(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return await self._host("vector_list", *args, **kwargs)

    async def get_knowledge_file_stream(self, storage_path: str) -> bytes:
        return await self._host("get_knowledge_file_stream", storage_path)

    async def set_plugin_storage(self, key: str, value: bytes) -> None:
        return await self._host("set_plugin_storage", key, value)

    async def get_plugin_storage(self, key: str) -> bytes:
        return await self._host("get_plugin_storage", key)

    async def get_plugin_storage_keys(self) -> list[str]:
        return await self._host("get_plugin_storage_keys")

    async def delete_plugin_storage(self, key: str) -> None:
        return await self._host("delete_plugin_storage", key)

    async def list_knowledge_bases(self) -> list[dict[str, Any]]:
        return [{"uuid": self.kb_id, "name": "sim", "description": ""}]


@contextlib.contextmanager
def inline_blocking() -> Iterator[None]:
    """`asyncio.to_thread` (and the parse lane) runs the function on the loop after one turn: the
    same awaits as a worker thread, without the thread's timing, so that a seed replays exactly."""
    original, original_parse = asyncio.to_thread, blocking.in_parse_thread

    async def inline(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return fn(*args, **kwargs)

    asyncio.to_thread = inline  # type: ignore[assignment]
    blocking.in_parse_thread = inline  # type: ignore[assignment]
    try:
        yield
    finally:
        asyncio.to_thread = original  # type: ignore[assignment]
        blocking.in_parse_thread = original_parse  # type: ignore[assignment]
