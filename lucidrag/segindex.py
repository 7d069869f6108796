"""DEV ADAPTER (lead branch only; replaced by the segindex branch): the SegmentIndex interface over
keyword.BM25Index, persisted as one segment, so KB-state integration can be built and tested."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from .keyword import HEADING_FIELD, BM25Index, TokenizedChunk, query_terms


@dataclass(frozen=True)
class KeywordHit:
    chunk_id: str
    file_id: str
    score: float
    coverage: float
    body_coverage: float


@dataclass(frozen=True)
class IndexChanges:
    new_segments: dict[str, bytes]
    dropped_segments: list[str]
    manifest: bytes


class SegmentIndex:
    def __init__(self) -> None:
        self._bm25 = BM25Index()
        self._terms: dict[str, tuple[str, frozenset[str]]] = {}
        self._files: dict[str, list[str]] = {}
        self._segment: str | None = None
        self._dirty = False

    def add_file(self, file_id: str, chunks: Sequence[TokenizedChunk]) -> None:
        if file_id in self._files:
            raise ValueError(f"file {file_id} is already indexed")
        self._bm25.add_tokenized(file_id, chunks)
        self._files[file_id] = [c for c, _ in chunks]
        for cid, tfs in chunks:
            self._terms[cid] = (file_id, frozenset(tfs))
        self._dirty = True

    def remove_file(self, file_id: str, chunks: Sequence[TokenizedChunk] | None) -> bool:
        ids = self._files.pop(file_id, None)
        if ids is None:
            return False
        self._bm25.remove(file_id)
        for cid in ids:
            self._terms.pop(cid, None)
        self._dirty = True
        return True

    def search(self, query: str, top_k: int, file_ids: set[str] | None = None) -> list[KeywordHit]:
        weights = self.term_weights(query)
        total = sum(weights.values())
        out = []
        for cid, score in self._bm25.search(query, top_k, file_ids):
            file_id, terms = self._terms[cid]
            body = sum(w for t, w in weights.items() if t in terms)
            whole = sum(w for t, w in weights.items() if t in terms or HEADING_FIELD + t in terms)
            out.append(KeywordHit(cid, file_id, score, whole / total if total else 0.0, body / total if total else 0.0))
        return out

    def term_weights(self, query: str) -> dict[str, float]:
        return self._bm25.term_weights(query) if query_terms(query) else {}

    def __len__(self) -> int:
        return len(self._bm25)

    def __contains__(self, file_id: object) -> bool:
        return file_id in self._files

    def file_ids(self) -> set[str]:
        return set(self._files)

    def chunk_count(self, file_id: str) -> int:
        return len(self._files.get(file_id, ()))

    def stats(self) -> dict[str, float]:
        return {"chunks": len(self), "files": len(self._files), "segments": 1}

    def take_changes(self) -> IndexChanges:
        if not self._dirty:
            return IndexChanges({}, [], self._manifest())
        old, self._segment, self._dirty = self._segment, uuid.uuid4().hex, False
        blob = json.dumps({f: [[c, sorted(self._terms[c][1])] for c in ids] for f, ids in self._files.items()}).encode()
        return IndexChanges({self._segment: blob}, [old] if old else [], self._manifest())

    def _manifest(self) -> bytes:
        return json.dumps({"segments": [self._segment] if self._segment else []}).encode()

    @staticmethod
    def manifest_segment_names(manifest: bytes) -> list[str]:
        try:
            return list(json.loads(manifest)["segments"])
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"bad manifest: {error}") from error

    @classmethod
    def load(cls, manifest: bytes, segments: dict[str, bytes]) -> SegmentIndex:
        index = cls()
        for name in cls.manifest_segment_names(manifest):
            if name not in segments:
                raise ValueError(f"segment {name} missing")
            try:
                files = json.loads(segments[name])
            except ValueError as error:
                raise ValueError("bad segment") from error
            for file_id, chunks in files.items():
                index.add_file(file_id, [(c, {t: 1 for t in terms}) for c, terms in chunks])
            index._segment = name
        index._dirty = False
        return index
