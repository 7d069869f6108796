"""Host back ends for bench/bench_scale.py: the fake LangBot host of tests/fakes.py, with a vector
store that holds a million vectors (numpy), or with its vector calls served by a real Milvus Lite
the way LangBot 4.11.2's adapter does it; every host call timed, and the host state saved to disk
and loaded again (a plugin restart over the same host state).

`NumpyHost` keeps FakeHost's contract (HOST_CONTRACT.md, Chroma-like): squared-L2 distances, all
flat metadata kept plus the host's `_langbot_*` key, nested metadata refused, a collection's
dimension fixed by its first upsert, upsert replaces an id, `vector_delete(file_ids)` matches
metadata `file_id` only and returns len(file_ids), a delete by filter returns 0, `vector_list`
pages by offset/limit in insertion order with `total` -1 when filtered. Filters are evaluated with
`lucidrag.retrieval.filters.matches` (as FakeHost does); `file_id` equality / `$in` / `$nin` take an indexed
path so the KB-deletion and per-file listings stay fast at 1M.

`MilvusHost` sends vector calls to an in-process `MilvusClient` on a Milvus Lite file, doing what
langbot/pkg/vector/vdbs/milvus.py does: schema (id, vector, text, file_id, chunk_uuid), COSINE
AUTOINDEX, `insert` + `load_collection` per upsert, a missing collection created with dimension
1536 by search/delete/list, filters reduced to top-level clauses on the kept fields, one
`delete(filter='file_id == ...')` per file id, `query` with offset/limit (Milvus refuses
offset + limit > 16384) followed by a `count(*)` query, as `list_by_filter` does.

Every host API method is wrapped by `_timed`: `host_s` is the wall time spent inside host calls
(time the plugin waits for LangBot), `calls` counts them by method (FakeHost). Embeddings are a
deterministic hashed character-4-gram bag (numpy), so similar texts are close; an optional
provider latency model (`embed_latency_s` per call + `embed_per_text_s` per text) makes an
embedding call take as long as a hosted provider's.
"""

from __future__ import annotations

import asyncio
import functools
import json
import pickle
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lucidrag.engine import Engine  # noqa: E402
from lucidrag.retrieval.filters import matches  # noqa: E402
from tests.fakes import FakeHost, HostError  # noqa: E402

HOST_METHODS = ("invoke_embedding", "invoke_rerank", "vector_upsert", "vector_search", "vector_delete",
                "vector_list", "get_knowledge_file_stream", "set_plugin_storage", "get_plugin_storage",
                "get_plugin_storage_keys", "delete_plugin_storage")
_MULT = np.uint32(2654435761)
SNAPSHOT_FORMAT = 3  # bump when save/load or info.json change


def storage_kind(key: str) -> tuple[str, str]:
    """(KB id or "", what the key holds) for the write accounting: "records", "journal",
    "segments", "manifest" or "other" (meta, settings, failures, markers); a part (`#n`) counts
    as its value."""
    kb_id, _, rest = key.partition("#")[0].partition("/kb/")[2].partition("/")
    for prefix, kind in (("file/", "records"), ("journal/", "journal"), ("kw/seg/", "segments"),
                         ("kw/manifest", "manifest")):
        if rest.startswith(prefix):
            return kb_id, kind
    return kb_id, "other"


def fast_embed(text: str, dim: int) -> list[float]:
    """Unit vector of hashed, signed character 4-grams of the lowercased UTF-8 text."""
    b = np.frombuffer(text.lower().encode("utf-8") or b" ", dtype=np.uint8).astype(np.uint32)
    if len(b) < 4:
        b = np.pad(b, (0, 4 - len(b)))
    grams = (b[:-3] << 24) | (b[1:-2] << 16) | (b[2:-1] << 8) | b[3:]
    h = grams * _MULT
    vector = np.bincount((h >> 16) % dim, weights=((h >> 7) & 1).astype(np.float64) * 2 - 1, minlength=dim)
    norm = float(np.linalg.norm(vector)) or 1.0
    return (vector / norm).tolist()


def _timed(cls: type) -> type:
    """Wrap the host API methods of a leaf class so their wall time adds to `host_s`."""
    for name in HOST_METHODS:
        inner = getattr(cls, name)

        async def wrapper(self: Any, *args: Any, _inner: Callable = inner, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await _inner(self, *args, **kwargs)
            finally:
                self.host_s += time.perf_counter() - t0
        setattr(cls, name, functools.wraps(inner)(wrapper))
    return cls


class ScaleHostBase(FakeHost):
    """FakeHost + the plugin's engine (like tests.conftest.FakePlugin) + timing and fast embeddings."""

    kind = "base"

    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.engine = Engine()
        self.dim = dim
        self.host_s = 0.0
        self.embed_latency_s = 0.0
        self.embed_per_text_s = 0.0
        self.deleted_kbs: set[str] = set()  # KBs whose row LangBot deleted: vector calls refused
        self.written: Counter[tuple[str, str]] = Counter()  # bytes handed to set_plugin_storage, by storage_kind
        self.writes: Counter[tuple[str, str]] = Counter()  # set_plugin_storage calls, by storage_kind

    async def _call(self, method: str, **kwargs: Any) -> None:
        await super()._call(method, **kwargs)
        if kwargs.get("collection_id") in self.deleted_kbs:
            # LangBot 4.11.2 deletes the KB's row once on_knowledge_base_delete returns
            # (api/http/service/knowledge.py), and every vector action first resolves the
            # collection to that row (rag/service/runtime.py _resolve_knowledge_base_uuid).
            raise HostError("Knowledge base not found")

    def restart_plugin(self) -> None:
        """A new plugin process over the same host state: a fresh engine, nothing carried over."""
        self.engine = Engine()

    async def invoke_embedding(self, embedding_model_uuid: str, texts: list[str]) -> list[list[float]]:
        await self._call("invoke_embedding", embedding_model_uuid=embedding_model_uuid, texts=texts)
        if self.embed_latency_s or self.embed_per_text_s:
            await asyncio.sleep(self.embed_latency_s + self.embed_per_text_s * len(texts))
        self.embedded_texts += len(texts)
        return [fast_embed(t, self.dim) for t in texts]

    async def get_knowledge_file_stream(self, storage_path: str) -> bytes:
        return await super().get_knowledge_file_stream(storage_path)

    async def set_plugin_storage(self, key: str, value: bytes) -> None:
        await super().set_plugin_storage(key, value)
        self.written[storage_kind(key)] += len(value)
        self.writes[storage_kind(key)] += 1

    async def get_plugin_storage(self, key: str) -> bytes:
        return await super().get_plugin_storage(key)

    async def get_plugin_storage_keys(self) -> list[str]:
        return await super().get_plugin_storage_keys()

    async def delete_plugin_storage(self, key: str) -> None:
        await super().delete_plugin_storage(key)

    async def invoke_rerank(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return await super().invoke_rerank(*args, **kwargs)

    # --------------------------------------------------------------- for the benchmark
    def count(self, collection_id: str, file_id: str | None = None) -> int:
        """Vectors the vector DB holds for the collection (or one file of it)."""
        raise NotImplementedError

    def kb_storage_keys(self, kb_id: str) -> list[str]:
        return [k for k in self.storage if kb_id in k]

    def storage_accounting(self, kb_id: str) -> dict[str, dict[str, int]]:
        """For one KB, by kind: bytes and calls written so far, and bytes and keys stored now."""
        stored: Counter[str] = Counter()
        keys: Counter[str] = Counter()
        for key, value in self.storage.items():
            owner, kind = storage_kind(key)
            if owner == kb_id:
                stored[kind] += len(value)
                keys[kind] += 1
        return {"written": {k: v for (kb, k), v in self.written.items() if kb == kb_id},
                "writes": {k: v for (kb, k), v in self.writes.items() if kb == kb_id},
                "stored": dict(stored), "keys": dict(keys)}

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        with open(directory / "storage.pickle", "wb") as f:
            pickle.dump(self.storage, f, protocol=5)

    def load(self, directory: Path) -> None:
        with open(directory / "storage.pickle", "rb") as f:
            self.storage = pickle.load(f)


class _Collection:
    """One collection's rows: vectors (float32), ids, JSON metadata, an alive mask, and an index
    from file_id to rows."""

    def __init__(self, dim: int, capacity: int = 1024) -> None:
        self.dim = dim
        self.vectors = np.zeros((capacity, dim), np.float32)
        self.norms = np.zeros(capacity, np.float32)
        self.alive = np.zeros(capacity, bool)
        self.n = 0
        self.live = 0
        self.ids: list[str | None] = []
        self.metas: list[bytes | None] = []
        self.files: list[str | None] = []
        self.row_of: dict[str, int] = {}
        self.rows_of_file: dict[str, list[int]] = {}

    def _grow(self, need: int) -> None:
        cap = len(self.alive)
        if need <= cap:
            return
        new = max(need, cap * 2, 1024)
        for name in ("vectors", "norms", "alive"):
            old = getattr(self, name)
            arr = np.zeros((new,) + old.shape[1:], old.dtype)
            arr[:cap] = old
            setattr(self, name, arr)

    def add(self, ids: list[str], vectors: np.ndarray, metas: list[dict[str, Any]]) -> None:
        for chunk_id in ids:
            if chunk_id in self.row_of:
                self.remove_rows([self.row_of[chunk_id]])
        start = self.n
        self._grow(start + len(ids))
        self.vectors[start : start + len(ids)] = vectors
        self.norms[start : start + len(ids)] = (vectors * vectors).sum(axis=1)
        self.alive[start : start + len(ids)] = True
        for k, (chunk_id, meta) in enumerate(zip(ids, metas)):
            row = start + k
            file_id = meta.get("file_id")
            self.ids.append(chunk_id)
            self.metas.append(json.dumps(meta, ensure_ascii=False).encode())
            self.files.append(str(file_id) if file_id is not None else None)
            self.row_of[chunk_id] = row
            if file_id is not None:
                self.rows_of_file.setdefault(str(file_id), []).append(row)
        self.n += len(ids)
        self.live += len(ids)

    def remove_rows(self, rows: list[int]) -> None:
        for row in rows:
            if not self.alive[row]:
                continue
            self.alive[row] = False
            self.live -= 1
            self.row_of.pop(self.ids[row], None)  # type: ignore[arg-type]
            file_id = self.files[row]
            if file_id is not None:
                rows_of = self.rows_of_file.get(file_id)
                if rows_of is not None:
                    rows_of.remove(row)
                    if not rows_of:
                        del self.rows_of_file[file_id]
            self.ids[row] = self.metas[row] = self.files[row] = None

    def meta(self, row: int) -> dict[str, Any]:
        return json.loads(self.metas[row])  # type: ignore[arg-type]

    def select(self, filters: dict[str, Any] | None) -> np.ndarray:
        """Alive rows matching a Chroma-style filter, in insertion order."""
        if not filters:
            return np.flatnonzero(self.alive[: self.n])
        if set(filters) == {"file_id"}:
            cond = filters["file_id"]
            op, value = next(iter(cond.items())) if isinstance(cond, dict) else ("$eq", cond)
            if op == "$eq":
                return np.array(sorted(self.rows_of_file.get(str(value), [])), dtype=np.int64)
            if op == "$in":
                rows = [r for f in value for r in self.rows_of_file.get(str(f), [])]
                return np.array(sorted(rows), dtype=np.int64)
            if op == "$nin":
                mask = self.alive[: self.n].copy()
                for f in value:
                    mask[self.rows_of_file.get(str(f), [])] = False
                return np.flatnonzero(mask)
        return np.array([r for r in np.flatnonzero(self.alive[: self.n]) if matches(filters, self.meta(int(r)))],
                        dtype=np.int64)

    def compact(self) -> tuple[np.ndarray, tuple[list, list, list]]:
        rows = np.flatnonzero(self.alive[: self.n]).tolist()
        return self.vectors[rows], ([self.ids[r] for r in rows], [self.metas[r] for r in rows],
                                    [self.files[r] for r in rows])

    @classmethod
    def restore(cls, dim: int, vectors: np.ndarray, ids: list[str], metas: list[bytes],
                files: list[str | None]) -> _Collection:
        """From `compact`'s output, without decoding any metadata (no transient garbage that the
        plugin would later reuse, which would make the host's share of RSS look larger)."""
        c = cls(dim, 0)
        n = len(ids)
        c.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        c.norms = (c.vectors * c.vectors).sum(axis=1)
        c.alive = np.ones(n, bool)
        c.n = c.live = n
        c.ids, c.metas, c.files = list(ids), list(metas), list(files)
        c.row_of = {chunk_id: row for row, chunk_id in enumerate(ids)}
        for row, file_id in enumerate(files):
            if file_id is not None:
                c.rows_of_file.setdefault(file_id, []).append(row)
        return c


@_timed
class NumpyHost(ScaleHostBase):
    """The fake host (Chroma-like) with a numpy vector store that holds 1M vectors."""

    kind = "fake"

    def __init__(self, dim: int = 32) -> None:
        super().__init__(dim)
        self.store: dict[str, _Collection] = {}

    async def vector_upsert(self, collection_id: str, vectors: list[list[float]], ids: list[str],
                            metadata: list[dict[str, Any]] | None = None,
                            documents: list[str] | None = None) -> None:
        await self._upsert_called(collection_id, vectors, ids, metadata)
        if not ids:
            return
        array = np.asarray(vectors, dtype=np.float32)
        dim = self.dims.setdefault(collection_id, array.shape[1])
        if array.ndim != 2 or array.shape[1] != dim:
            raise HostError(f"dimension {array.shape[-1]} does not match collection dimension {dim}")
        metas = []
        for meta in metadata or [{}] * len(ids):
            for key, value in meta.items():
                if not isinstance(value, (str, int, float, bool)):
                    raise HostError(f"metadata value for {key} must be str/int/float/bool")
            metas.append({**meta, "_langbot_knowledge_base_uuid": collection_id})
        collection = self.store.get(collection_id)
        if collection is None:
            collection = self.store[collection_id] = _Collection(dim)
        collection.add(list(ids), array, metas)

    async def vector_search(self, collection_id: str, query_vector: list[float], top_k: int = 5,
                            filters: dict[str, Any] | None = None, search_type: str = "vector",
                            query_text: str = "", vector_weight: float | None = None) -> list[dict[str, Any]]:
        await self._call("vector_search", collection_id=collection_id, filters=filters)
        if filters and len(filters) > 1:
            raise HostError("Expected where to have exactly one operator")
        collection = self.store.get(collection_id)
        if collection is None or collection.live == 0:
            return []
        q = np.asarray(query_vector, dtype=np.float32)
        if filters:
            rows = collection.select(filters)
            d = collection.norms[rows] - 2.0 * (collection.vectors[rows] @ q) + float(q @ q)
        else:
            rows = np.arange(collection.n)
            d = collection.norms[: collection.n] - 2.0 * (collection.vectors[: collection.n] @ q) + float(q @ q)
            d = np.where(collection.alive[: collection.n], d, np.inf)
        k = min(top_k, int(np.isfinite(d).sum()))
        if k <= 0:
            return []
        top = np.argpartition(d, k - 1)[:k] if k < len(d) else np.arange(len(d))
        top = top[np.argsort(d[top], kind="stable")]
        return [{"id": collection.ids[int(rows[i])], "distance": float(d[i]), "metadata": collection.meta(int(rows[i]))}
                for i in top]

    async def vector_delete(self, collection_id: str, file_ids: list[str] | None = None,
                            filters: dict[str, Any] | None = None) -> int:
        await self._call("vector_delete", collection_id=collection_id, file_ids=file_ids, filters=filters)
        collection = self.store.get(collection_id)
        if file_ids:
            if collection is not None:
                for file_id in file_ids:
                    collection.remove_rows(list(collection.rows_of_file.get(str(file_id), [])))
            return len(file_ids)
        if filters and collection is not None:
            # A whole-KB delete is a million rows of host work; LangBot does it in its own process,
            # so it runs in a worker thread here rather than stalling the plugin's event loop.
            def remove_matching() -> None:
                collection.remove_rows([int(r) for r in collection.select(filters)])
            await asyncio.to_thread(remove_matching)
        return 0

    async def vector_list(self, collection_id: str, filters: dict[str, Any] | None = None,
                          limit: int = 20, offset: int = 0) -> dict[str, Any]:
        await self._call("vector_list", collection_id=collection_id, filters=filters, offset=offset)
        collection = self.store.get(collection_id)
        if collection is None:
            return {"items": [], "total": -1 if filters else 0}
        rows = collection.select(filters)
        items = []
        for r in rows[offset : offset + limit]:
            meta = collection.meta(int(r))
            items.append({"id": collection.ids[int(r)], "document": meta.get("text"), "metadata": meta})
        return {"items": items, "total": -1 if filters else int(len(rows))}

    # --------------------------------------------------------------- for the benchmark
    def count(self, collection_id: str, file_id: str | None = None) -> int:
        collection = self.store.get(collection_id)
        if collection is None:
            return 0
        return collection.live if file_id is None else len(collection.rows_of_file.get(file_id, []))

    def save(self, directory: Path) -> None:
        super().save(directory)
        for collection_id, collection in self.store.items():
            vectors, rows = collection.compact()
            np.save(directory / f"vectors-{collection_id}.npy", vectors)
            with open(directory / f"rows-{collection_id}.pickle", "wb") as f:
                pickle.dump(rows, f, protocol=5)
        (directory / "collections.json").write_text(json.dumps({c: self.dims[c] for c in self.store}))

    def load(self, directory: Path) -> None:
        super().load(directory)
        for collection_id, dim in json.loads((directory / "collections.json").read_text()).items():
            vectors = np.load(directory / f"vectors-{collection_id}.npy")
            with open(directory / f"rows-{collection_id}.pickle", "rb") as f:
                ids, metas, files = pickle.load(f)
            self.store[collection_id] = _Collection.restore(dim, vectors, ids, metas, files)
            self.dims[collection_id] = dim


@_timed
class MilvusHost(ScaleHostBase):
    """The fake host whose vector calls go to a real Milvus Lite, like LangBot 4.11.2's adapter."""

    kind = "milvus"
    KEPT = {"text", "file_id", "chunk_uuid"}
    DB = "milvus.db"

    def __init__(self, dim: int = 32, directory: Path | None = None) -> None:
        super().__init__(dim)
        self.directory = directory
        self.client: Any = None
        self.made: set[str] = set()
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="langbot-milvus")
        if directory is not None:
            self._connect(directory)

    def _connect(self, directory: Path) -> None:
        from pymilvus import MilvusClient

        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.client = MilvusClient(uri=str(directory / self.DB))
        self.made = set()

    @staticmethod
    def _name(collection_id: str) -> str:
        n = collection_id.replace("-", "_")
        return n if n[0].isalpha() or n[0] == "_" else "kb_" + n

    def _ensure(self, collection_id: str, dim: int | None = None) -> str:
        from pymilvus import CollectionSchema, DataType, FieldSchema
        from pymilvus.milvus_client.index import IndexParams

        name = self._name(collection_id)
        if name in self.made:
            return name
        if not self.client.has_collection(collection_name=name):
            fields = [FieldSchema(name="id", dtype=DataType.VARCHAR, is_primary=True, max_length=255),
                      FieldSchema(name="vector", dtype=DataType.FLOAT_VECTOR, dim=dim or 1536),
                      FieldSchema(name="text", dtype=DataType.VARCHAR, max_length=65535),
                      FieldSchema(name="file_id", dtype=DataType.VARCHAR, max_length=255),
                      FieldSchema(name="chunk_uuid", dtype=DataType.VARCHAR, max_length=255)]
            self.client.create_collection(collection_name=name, schema=CollectionSchema(fields=fields),
                                          metric_type="COSINE")
            ip = IndexParams()
            ip.add_index(field_name="vector", index_type="AUTOINDEX", metric_type="COSINE")
            self.client.create_index(collection_name=name, index_params=ip)
        self.made.add(name)
        return name

    def _expr(self, filters: dict[str, Any] | None) -> str:
        """Top-level clauses on kept fields only (the adapter drops the rest, $and/$or included)."""
        def lit(v: Any) -> str:
            return json.dumps(v) if isinstance(v, str) else str(v)

        parts = []
        for key, cond in (filters or {}).items():
            key = {"uuid": "chunk_uuid"}.get(key, key)
            if key not in self.KEPT:
                continue
            op, value = next(iter(cond.items())) if isinstance(cond, dict) else ("$eq", cond)
            if op == "$eq":
                parts.append(f"{key} == {lit(value)}")
            elif op == "$ne":
                parts.append(f"{key} != {lit(value)}")
            elif op == "$in":
                parts.append(f"{key} in [{', '.join(lit(v) for v in value)}]")
            elif op == "$nin":
                parts.append(f"{key} not in [{', '.join(lit(v) for v in value)}]")
        return " and ".join(parts)

    async def _run(self, fn: Callable[..., Any], **kwargs: Any) -> Any:
        """LangBot runs these in its own process: not on the plugin's bounded executor."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, functools.partial(fn, **kwargs))

    async def vector_upsert(self, collection_id: str, vectors: list[list[float]], ids: list[str],
                            metadata: list[dict[str, Any]] | None = None,
                            documents: list[str] | None = None) -> None:
        await self._call("vector_upsert", collection_id=collection_id, ids=ids)
        if not vectors:
            return
        missing = [k for m in (metadata or [{}]) for k in ("text", "file_id", "uuid") if k not in m]
        if missing:
            raise HostError(f"Insert missed an field `{missing[0]}` to collection without set nullable")
        name = self._ensure(collection_id, len(vectors[0]))
        data = [{"id": i, "vector": v, "text": m["text"], "file_id": m["file_id"], "chunk_uuid": m["uuid"]}
                for i, v, m in zip(ids, vectors, metadata or [])]
        await self._run(self.client.insert, collection_name=name, data=data)
        await self._run(self.client.load_collection, collection_name=name)

    async def vector_search(self, collection_id: str, query_vector: list[float], top_k: int = 5,
                            filters: dict[str, Any] | None = None, search_type: str = "vector",
                            query_text: str = "", vector_weight: float | None = None) -> list[dict[str, Any]]:
        await self._call("vector_search", collection_id=collection_id, filters=filters)
        name = self._ensure(collection_id)
        kwargs: dict[str, Any] = dict(collection_name=name, data=[query_vector], limit=top_k,
                                      search_params={"metric_type": "COSINE", "params": {}},
                                      output_fields=["text", "file_id", "chunk_uuid"])
        expr = self._expr(filters)
        if expr:
            kwargs["filter"] = expr
        res = await self._run(self.client.search, **kwargs)
        return [{"id": h["id"], "distance": h["distance"],
                 "metadata": {k: v for k, v in (("text", h["entity"].get("text")),
                                                ("file_id", h["entity"].get("file_id")),
                                                ("uuid", h["entity"].get("chunk_uuid"))) if v is not None}}
                for h in (res[0] if res else [])]

    async def vector_delete(self, collection_id: str, file_ids: list[str] | None = None,
                            filters: dict[str, Any] | None = None) -> int:
        await self._call("vector_delete", collection_id=collection_id, file_ids=file_ids, filters=filters)
        name = self._ensure(collection_id)
        if file_ids:
            for f in file_ids:  # the host calls delete_by_file_id once per id
                await self._run(self.client.delete, collection_name=name, filter=f"file_id == {json.dumps(f)}")
            return len(file_ids)
        expr = self._expr(filters)
        if expr:
            await self._run(self.client.delete, collection_name=name, filter=expr)
        return 0

    async def vector_list(self, collection_id: str, filters: dict[str, Any] | None = None,
                          limit: int = 20, offset: int = 0) -> dict[str, Any]:
        await self._call("vector_list", collection_id=collection_id, filters=filters, offset=offset)
        name = self._ensure(collection_id)
        if offset + limit > 16384:
            raise HostError(f"invalid max query result window, (offset+limit) should be in range [1, 16384], "
                            f"but got {offset + limit}")
        kwargs: dict[str, Any] = dict(collection_name=name, output_fields=["text", "file_id", "chunk_uuid"],
                                      limit=limit, offset=offset)
        count_kwargs: dict[str, Any] = dict(collection_name=name, output_fields=["count(*)"])
        expr = self._expr(filters)
        if expr:
            kwargs["filter"] = count_kwargs["filter"] = expr
        rows = await self._run(self.client.query, **kwargs)
        total = -1
        try:  # list_by_filter counts after every page
            counted = await self._run(self.client.query, **count_kwargs)
            total = int(counted[0].get("count(*)", -1)) if counted else -1
        except Exception:  # noqa: BLE001 - the adapter ignores a failed count too
            pass
        return {"items": [{"id": r["id"], "document": r.get("text"),
                           "metadata": {"text": r.get("text", ""), "file_id": r.get("file_id", ""),
                                        "uuid": r.get("chunk_uuid", "")}} for r in rows], "total": total}

    # --------------------------------------------------------------- for the benchmark
    def count(self, collection_id: str, file_id: str | None = None) -> int:
        name = self._name(collection_id)
        if not self.client.has_collection(collection_name=name):
            return 0
        self.client.load_collection(collection_name=name)
        kwargs: dict[str, Any] = {"filter": f"file_id == {json.dumps(file_id)}"} if file_id else {}
        return int(self.client.query(collection_name=name, output_fields=["count(*)"], **kwargs)[0]["count(*)"])

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def save(self, directory: Path) -> None:
        """The Milvus Lite file is copied (the client is closed for that and opened again)."""
        super().save(directory)
        assert self.directory is not None
        if directory.resolve() != self.directory.resolve():
            self.close()
            _copy(self.directory / self.DB, directory / self.DB)
            self._connect(self.directory)
        (directory / "collections.json").write_text(json.dumps(self.dims))

    def load(self, directory: Path, work: Path | None = None) -> None:
        """Open a copy of the saved Milvus Lite file (in `work`), so the measurement may delete."""
        super().load(directory)
        work = work or directory
        if work.resolve() != directory.resolve():
            work.mkdir(parents=True, exist_ok=True)
            _copy(directory / self.DB, work / self.DB)
        self._connect(work)
        self.dims = json.loads((directory / "collections.json").read_text())


def _copy(source: Path, target: Path) -> None:
    """Milvus Lite keeps a file (older) or a directory (newer) at its uri."""
    if target.is_dir():
        shutil.rmtree(target)
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copy2(source, target)


def make_host(backend: str, dim: int, directory: Path | None = None) -> ScaleHostBase:
    if backend == "milvus":
        return MilvusHost(dim, directory)
    return NumpyHost(dim)
