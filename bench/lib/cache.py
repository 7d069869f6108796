"""On-disk embedding cache: one sqlite file, keyed by (model, kind, sha256(text)).

Default location: $LUCIDRAG_BENCH_CACHE or ~/.cache/lucidrag-bench/embeddings.sqlite.
Vectors are stored as float32 blobs. Standard library + numpy only.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path


def default_cache_path() -> Path:
    env = os.environ.get("LUCIDRAG_BENCH_CACHE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "lucidrag-bench" / "embeddings.sqlite"


class EmbeddingCache:
    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS emb (model TEXT, kind TEXT, sha TEXT, vec BLOB, PRIMARY KEY (model, kind, sha))"
        )
        self._db.commit()

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get_many(self, model: str, kind: str, shas: list[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for i in range(0, len(shas), 500):
            chunk = shas[i : i + 500]
            q = f"SELECT sha, vec FROM emb WHERE model=? AND kind=? AND sha IN ({','.join('?' * len(chunk))})"
            out.update(self._db.execute(q, [model, kind, *chunk]).fetchall())
        return out

    def put_many(self, model: str, kind: str, items: list[tuple[str, bytes]]) -> None:
        self._db.executemany("INSERT OR REPLACE INTO emb VALUES (?,?,?,?)", [(model, kind, s, v) for s, v in items])
        self._db.commit()

    def close(self) -> None:
        self._db.close()


class CachedEmbedder:
    """Wraps an embedder; only texts missing from the cache are embedded (in chunks, saved as they finish)."""

    chunk = 256

    def __init__(self, inner, cache: EmbeddingCache | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.cache = cache or EmbeddingCache()
        self.hits = 0
        self.misses = 0

    def _get(self, texts: list[str], kind: str) -> list[list[float]]:
        import numpy as np

        texts = list(texts)
        shas = [EmbeddingCache.key(t) for t in texts]
        found = self.cache.get_many(self.name, kind, list(dict.fromkeys(shas)))
        todo = list(dict.fromkeys(s for s in shas if s not in found))
        self.hits += len(texts) - sum(1 for s in shas if s not in found)
        by_sha = {s: t for s, t in zip(shas, texts)}
        fn = self.inner.embed_queries if kind == "query" else self.inner.embed_documents
        for i in range(0, len(todo), self.chunk):
            # Another run sharing the cache may have embedded some of these meanwhile.
            done_elsewhere = self.cache.get_many(self.name, kind, todo[i : i + self.chunk])
            found.update(done_elsewhere)
            self.hits += sum(1 for s in shas if s in done_elsewhere)
            part = [s for s in todo[i : i + self.chunk] if s not in done_elsewhere]
            if not part:
                continue
            vecs = fn([by_sha[s] for s in part])
            items = [(s, np.asarray(v, dtype=np.float32).tobytes()) for s, v in zip(part, vecs)]
            self.cache.put_many(self.name, kind, items)
            found.update(items)
            self.misses += len(part)
        return [np.frombuffer(found[s], dtype=np.float32).tolist() for s in shas]

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return self._get(texts, "query")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._get(texts, "passage")

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)
