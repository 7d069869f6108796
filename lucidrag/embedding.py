"""Batched, retried, cached calls to the host's embedding model.

The host passes `invoke_embedding` straight to the provider without splitting, and providers cap a
request (some at 10 texts, some at 64). We send bounded batches; when a batch fails for a reason
other than a transient error we halve it and remember, per model, the size that worked, so the
next file starts there. Vectors are cached by (KB, model, sha256(text)) so re-uploading the same
file costs no embedding calls while the plugin process lives.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from .errors import EmbeddingFailure
from .host import HostApi, describe, is_transient

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 32
RETRY_DELAYS = (0.5, 2.0, 5.0)
T = TypeVar("T")


async def with_retries(call: Callable[[], Awaitable[T]], delays: Sequence[float] = RETRY_DELAYS) -> T:
    """Run `call`, retrying transient host errors after each delay in `delays`."""
    for delay in delays:
        try:
            return await call()
        except Exception as error:  # noqa: BLE001 - classified below, re-raised when not transient
            if not is_transient(error):
                raise
            logger.warning("transient host error, retrying in %.1fs: %s", delay, describe(error))
            await asyncio.sleep(delay)
    return await call()


class VectorCache:
    """LRU map (kb_id, model, sha256) → vector, bounded by entry count."""

    def __init__(self, max_entries: int = 50_000) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str, str], list[float]] = OrderedDict()

    def get(self, key: tuple[str, str, str]) -> list[float] | None:
        vector = self._entries.get(key)
        if vector is not None:
            self._entries.move_to_end(key)
        return vector

    def put(self, key: tuple[str, str, str], vector: list[float]) -> None:
        self._entries[key] = vector
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def drop_kb(self, kb_id: str) -> None:
        for key in [k for k in self._entries if k[0] == kb_id]:
            del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)


class Embedder:
    """Embeds texts for one installation. `batch_sizes` remembers the working size per model."""

    def __init__(self, host: HostApi, cache: VectorCache, batch_sizes: dict[str, int],
                 retry_delays: Sequence[float] = RETRY_DELAYS) -> None:
        self.host = host
        self.cache = cache
        self.batch_sizes = batch_sizes
        self.retry_delays = retry_delays
        self.calls = 0

    async def embed(self, kb_id: str, model: str, texts: Sequence[str]) -> list[list[float]]:
        keys = [(kb_id, model, hashlib.sha256(t.encode("utf-8")).hexdigest()) for t in texts]
        vectors: list[list[float] | None] = [self.cache.get(k) for k in keys]
        missing: dict[tuple[str, str, str], str] = {}
        for key, text, vector in zip(keys, texts, vectors):
            if vector is None:
                missing.setdefault(key, text)
        if missing:
            fresh = await self._embed_uncached(model, list(missing.values()))
            for key, vector in zip(missing, fresh):
                self.cache.put(key, vector)
            by_key = dict(zip(missing, fresh))
            vectors = [v if v is not None else by_key[k] for k, v in zip(keys, vectors)]
        result = [v for v in vectors if v is not None]
        _check_dimensions(result)
        return result

    async def embed_query(self, model: str, text: str) -> list[float]:
        vectors = await self._call(model, [text])
        return vectors[0]

    async def _embed_uncached(self, model: str, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        start = 0
        while start < len(texts):
            size = self.batch_sizes.get(model, DEFAULT_BATCH_SIZE)
            batch = texts[start : start + size]
            try:
                out.extend(await self._call(model, batch))
            except EmbeddingFailure as failure:
                if len(batch) == 1 or failure.permanent:
                    raise
                self.batch_sizes[model] = max(1, len(batch) // 2)
                logger.warning("embedding batch of %d failed (%s); retrying with %d",
                               len(batch), failure, self.batch_sizes[model])
                continue
            start += len(batch)
        return out

    async def _call(self, model: str, batch: list[str]) -> list[list[float]]:
        self.calls += 1
        try:
            vectors = await with_retries(lambda: self.host.invoke_embedding(model, batch), self.retry_delays)
        except Exception as error:  # noqa: BLE001 - host errors arrive as many types
            raise EmbeddingFailure(
                f"The embedding model failed: {describe(error)}. Check the embedding model's "
                "settings (API key, base URL, model name) under Models, then upload the file again."
            ) from error
        if not isinstance(vectors, list) or len(vectors) != len(batch):
            got = len(vectors) if isinstance(vectors, list) else type(vectors).__name__
            raise EmbeddingFailure(
                f"The embedding model returned {got} vectors for {len(batch)} texts. The model or "
                "its provider is misbehaving; try another embedding model.", permanent=True
            )
        for vector in vectors:
            if not vector or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in vector):
                raise EmbeddingFailure(
                    "The embedding model returned an empty or invalid vector. Check the model's "
                    "settings, or choose another embedding model.", permanent=True
                )
        return [[float(x) for x in v] for v in vectors]


def _check_dimensions(vectors: list[list[float]]) -> None:
    dims = {len(v) for v in vectors}
    if len(dims) > 1:
        raise EmbeddingFailure(
            f"The embedding model returned vectors of different sizes ({sorted(dims)}). "
            "Choose another embedding model.", permanent=True
        )
