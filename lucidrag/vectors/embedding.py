"""Batched, cached calls to the host's embedding model, returning unit-length vectors.

The host passes `invoke_embedding` straight to the provider without splitting, and providers cap a
request (some at 10 texts, some at 64). We send bounded batches. The batch shrinks only when the
provider says the batch was too large, and grows back after successes (`BatchSize`); a rate limit,
a 5xx or a dropped connection never changes it (those are retried or reported by `host.py`).

Every vector is scaled to unit length before anything else sees it: Ollama, TEI and many local
models return longer vectors, and LangBot's Chroma collections rank by (squared) L2 distance, which
for unit vectors is 2 − 2·cos. Vectors are cached as float32 by (KB, model, sha256(text)), bounded
in bytes, so re-uploading the same file costs no embedding calls while the plugin process lives.
A file's vectors are one float32 matrix (6 KiB per 1,536-dim chunk, not the ~48 KiB of a list of
Python floats); the caller converts a batch to lists only for the host call that needs them.
Hashing, checking and scaling run off the event loop.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import sys
from array import array
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from lucidrag.base.blocking import run_blocking
from lucidrag.base.errors import EmbeddingFailure, HostConnectionLost
from lucidrag.base.host import HostApi, describe, is_transient, with_retries

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 32
GROW_AFTER = 4  # full batches that must succeed before a larger size is tried
CACHE_BYTES = 64 * 2**20  # per installation: ~10,000 vectors of 1,536 dimensions
CACHE_ENTRY_OVERHEAD = 300  # bytes per entry besides the vector: key tuple, sha256 string, dict slot

CacheKey = tuple[str, str, str]

# "The batch was too large", as providers say it (OpenAI-compatible 400s, TEI's 413 "batch size 64 >
# maximum allowed batch size 32", DashScope's "should not be larger than 10", "too many inputs"),
# and as LangBot 4.11 summarises them in the host's UI language, dropping status and text: a 400
# becomes "Model request failed: Invalid request parameters", a 413 (an unmapped status for
# litellm) "Model request failed: API error". Those summaries are ambiguous, so a smaller batch
# must succeed before the limit is believed (see BatchSize).
_LANGBOT_TOO_LARGE = (
    # Invalid request parameters
    "invalid request parameters", "请求参数错误", "請求參數錯誤", "リクエストのパラメータが無効です",
    "parámetros de solicitud no válidos", "некорректные параметры запроса", "tham số yêu cầu không hợp lệ",
    "พารามิเตอร์คำขอไม่ถูกต้อง",
    # API error
    "api error", "api 错误", "api 錯誤", "api エラー", "error de api", "ошибка api", "ข้อผิดพลาด api",
    "lỗi api",
    # Context length exceeded
    "上下文长度超限", "上下文長度超出限制", "コンテキスト長の上限を超えました", "se superó el límite de contexto",
    "превышена длина контекста", "ความยาวบริบทเกินขีดจำกัด", "đã vượt quá độ dài ngữ cảnh",
)
_TOO_LARGE = re.compile(
    r"batch[ _]?size|too many (?:inputs|texts|items|documents|strings)|\b413\b|payload too large|"
    r"(?:request|entity) too large|maximum [^.]{0,40}(?:inputs|items|texts|batch)|"
    r"not be larger than|context length|" + "|".join(re.escape(word) for word in _LANGBOT_TOO_LARGE),
    re.IGNORECASE,
)
_STATED_LIMIT = re.compile(
    r"(?:maximum|max|at most|larger than|more than|up to|limit)[^0-9.]{0,30}?(\d+)", re.IGNORECASE
)


def batch_too_large(error: BaseException) -> bool:
    return _TOO_LARGE.search(str(error)) is not None


def stated_limit(error: BaseException) -> int | None:
    """The largest batch the provider says it accepts, when its message names one."""
    match = _STATED_LIMIT.search(str(error))
    return int(match.group(1)) if match else None


class BatchSize:
    """The batch size one embedding model accepts, learned from its answers.

    A "too large" answer halves the size (or jumps to the limit the provider names); the smaller
    size confirms the limit only once it succeeds, and a single text refused the same way proves
    the error was not about the batch at all, so nothing is learned from it. After `grow_after`
    full batches in a row the size grows again, up to the default or, once a limit is known, by
    bisection towards it."""

    def __init__(self, default: int = DEFAULT_BATCH_SIZE, grow_after: int = GROW_AFTER) -> None:
        self.default = default
        self.grow_after = grow_after
        self.size = default
        self._stated = default  # what a provider said outright
        self.ceiling = default  # largest size not known to be too large
        self._largest_ok = 0
        self._streak = 0
        self._suspect: int | None = None  # refused as too large; confirmed when a smaller one works

    def too_large(self, tried: int, stated: int | None = None) -> bool:
        """Record that `tried` texts were refused as too many. False: nothing smaller to try."""
        self._streak = 0
        if tried <= 1:  # one text refused "as too large": the batch was never the problem
            self.ceiling = self.size = self._stated
            self._suspect = None
            self._largest_ok = 0
            return False
        if stated is not None and 0 < stated < tried:
            self._stated = self.ceiling = min(self.ceiling, stated)
            self.size = self.ceiling
            return True
        self._suspect = tried if self._suspect is None else min(self._suspect, tried)
        self.size = max(min(self._largest_ok, tried - 1), tried // 2, 1)
        return True

    def succeeded(self, sent: int) -> None:
        if self._suspect is not None and sent < self._suspect:
            self.ceiling = min(self.ceiling, self._suspect - 1)
            self._suspect = None
        self._largest_ok = max(self._largest_ok, sent)
        if sent < self.size:
            return  # a file's short last batch says nothing about the limit
        self._streak += 1
        if self._streak >= self.grow_after and self.size < self.ceiling:
            grown = min(self.size * 2, self.ceiling)
            if self.ceiling < self.default:
                grown = min(grown, (self.size + self.ceiling + 1) // 2)
            self.size, self._streak = grown, 0


class VectorCache:
    """LRU map (kb_id, model, sha256) → unit vector as float32, bounded by its size in bytes."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._entries: OrderedDict[CacheKey, array] = OrderedDict()

    @staticmethod
    def cost(vector: array) -> int:
        return sys.getsizeof(vector) + CACHE_ENTRY_OVERHEAD

    def get(self, key: CacheKey) -> array | None:
        vector = self._entries.get(key)
        if vector is not None:
            self._entries.move_to_end(key)
        return vector

    def put(self, key: CacheKey, vector: array) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self.nbytes -= self.cost(old)
        self._entries[key] = vector
        self.nbytes += self.cost(vector)
        while self.nbytes > self.max_bytes and self._entries:
            _, evicted = self._entries.popitem(last=False)
            self.nbytes -= self.cost(evicted)

    def drop_kb(self, kb_id: str) -> None:
        for key in [k for k in self._entries if k[0] == kb_id]:
            self.nbytes -= self.cost(self._entries.pop(key))

    def __len__(self) -> int:
        return len(self._entries)


class _TooLarge(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(describe(error))
        self.error = error


class Embedder:
    """Embeds texts for one installation. `batch_sizes` holds the learned `BatchSize` per model."""

    def __init__(self, host: HostApi, cache: VectorCache, batch_sizes: dict[str, BatchSize]) -> None:
        self.host = host
        self.cache = cache
        self.batch_sizes = batch_sizes
        self.calls = 0

    async def embed(self, kb_id: str, model: str, texts: Sequence[str], uncached: Sequence[str] = ()) -> np.ndarray:
        """Unit vectors of `texts`, one float32 row each, then of `uncached`: embedded in the same
        batches, kept in no cache (the caller keeps them)."""
        keys = await run_blocking(_cache_keys, kb_id, model, texts)
        vectors: list[array | None] = [self.cache.get(k) for k in keys]
        missing: dict[CacheKey, str] = {}
        for key, text, vector in zip(keys, texts, vectors):
            if vector is None:
                missing.setdefault(key, text)
        extra: list[array] = []
        if missing or uncached:
            fresh = await self._embed_uncached(model, list(missing.values()), list(uncached))
            fresh, extra = fresh[: len(missing)], fresh[len(missing) :]
            for key, vector in zip(missing, fresh):
                self.cache.put(key, vector)
            by_key = dict(zip(missing, fresh))
            vectors = [v if v is not None else by_key[k] for k, v in zip(keys, vectors)]
        rows = [v for v in vectors if v is not None] + extra
        _check_dimensions(rows)
        return await run_blocking(_matrix, rows)

    async def embed_query(self, model: str, text: str) -> list[float]:
        try:
            vectors = await self._call(model, [text])
        except _TooLarge as refused:
            raise _failure(refused.error) from refused.error
        return vectors[0].tolist()

    async def _embed_uncached(self, model: str, own: list[str], others: list[str]) -> list[array]:
        """Vectors of `own` (the caller's texts) then of `others` (texts riding in its batches)."""
        size = self.batch_sizes.get(model)
        if not isinstance(size, BatchSize):
            size = self.batch_sizes[model] = BatchSize()
        texts = own + others
        out: list[array] = []
        start = 0
        while start < len(texts):
            batch = texts[start : start + size.size]
            riding = min(len(batch), max(0, start + len(batch) - len(own)))  # of `others`
            try:
                vectors = await self._call(model, batch, riding)
            except _TooLarge as refused:
                if not size.too_large(len(batch), stated_limit(refused.error)):
                    raise _failure(refused.error) from refused.error
                logger.warning("embedding model %s refused %d texts at once (%s); trying %d", model,
                               len(batch), refused, size.size)
                continue
            size.succeeded(len(batch))
            out.extend(vectors)
            start += len(batch)
        return out

    async def _call(self, model: str, batch: list[str], riding: int = 0) -> list[array]:
        """The batch's vectors; its last `riding` texts are not the caller's (an operator's message
        counts only the caller's)."""
        self.calls += 1
        try:
            vectors = await with_retries(lambda: self.host.invoke_embedding(model, batch))
        except HostConnectionLost:
            raise
        except Exception as error:  # noqa: BLE001 - host errors arrive as many types
            if batch_too_large(error):
                raise _TooLarge(error) from error
            raise _failure(error) from error
        if not isinstance(vectors, list) or len(vectors) != len(batch):
            raise _wrong_count(vectors, len(batch), riding)
        units = await run_blocking(_unit_vectors, vectors)
        if units is None:
            raise EmbeddingFailure(
                "The embedding model returned an empty or invalid vector. Check the model's "
                "settings, or choose another embedding model.", permanent=True
            )
        return units


def _wrong_count(vectors: object, sent: int, riding: int) -> EmbeddingFailure:
    """How many vectors came back for how many of the caller's texts (the texts riding along, e.g.
    the relevance cut's probes, counted out, unless the batch held nothing else)."""
    own = sent - riding if sent > riding else sent
    if isinstance(vectors, list):
        got: object = max(0, len(vectors) - (sent - own))
    else:
        got = type(vectors).__name__
    return EmbeddingFailure(f"The embedding model returned {got} vectors for {own} texts. The model or its "
                            "provider is misbehaving; try another embedding model.", permanent=True)


def _valid(vector: object) -> bool:
    return (isinstance(vector, (list, tuple)) and bool(vector)
            and all(isinstance(x, (int, float)) and math.isfinite(x) for x in vector))


def _unit_vectors(vectors: list[list[float]]) -> list[array] | None:
    """Each vector scaled to length 1, as float32; None if any is empty or not finite numbers."""
    if not all(_valid(v) for v in vectors):
        return None
    return [unit_vector(v) for v in vectors]


def unit_vector(vector: Sequence[float]) -> array:
    """The vector scaled to length 1, as float32. A zero vector stays zero (it has no direction)."""
    values = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(values))
    return array("f", (values / norm if norm > 0.0 else values * 0.0).astype(np.float32).tobytes())


def _cache_keys(kb_id: str, model: str, texts: Sequence[str]) -> list[CacheKey]:
    return [(kb_id, model, hashlib.sha256(t.encode("utf-8")).hexdigest()) for t in texts]


def _matrix(rows: list[array]) -> np.ndarray:
    """The rows (all of one length) as one float32 matrix."""
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    out = np.empty((len(rows), len(rows[0])), dtype=np.float32)
    for i, row in enumerate(rows):
        out[i] = np.frombuffer(row, dtype=np.float32)
    return out


def _failure(error: BaseException) -> EmbeddingFailure:
    if is_transient(error):
        advice = ("The provider is overloaded, rate-limited or unreachable; wait a little and upload "
                  "the file again (or raise the provider's rate limit).")
    else:
        advice = ("Check the embedding model's settings (API key, base URL, model name) under Models, "
                  "then upload the file again.")
    return EmbeddingFailure(f"The embedding model failed: {describe(error)}. {advice}")


def _check_dimensions(vectors: Sequence[Sequence[float]]) -> None:
    dims = {len(v) for v in vectors}
    if len(dims) > 1:
        raise EmbeddingFailure(
            f"The embedding model returned vectors of different sizes ({sorted(dims)}). "
            "Choose another embedding model.", permanent=True
        )
