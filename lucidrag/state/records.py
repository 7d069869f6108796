"""What LucidRAG remembers about each ingested file, independent of the vector backend.

Milvus and pgvector keep only `text`, `file_id` and the id of a vector, so everything retrieval
needs beyond that (chunk order for neighbours, parent passages, page and heading for citations,
the keyword index) is kept in a `FileRecord`, persisted in plugin storage per (KB, file) and
rebuildable from the host's vectors when storage is unavailable.
"""

from __future__ import annotations

import functools
import json
import re
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any

RECORD_VERSION = 1
_CHUNK_NAMESPACE = uuid.UUID("6f0d7c3e-2b1a-5c4d-9e8f-1a2b3c4d5e6f")


def chunk_uuid(document_id: str, index: int) -> str:
    """Deterministic, UUID-shaped vector id (Qdrant accepts only UUIDs or integers)."""
    return str(uuid.uuid5(_CHUNK_NAMESPACE, f"{document_id}:{index}"))


@functools.lru_cache(maxsize=1 << 16)  # asked for every vector hit of every query
def document_vector_id(document_id: str) -> str:
    """The id of a file's document vector: its name and opening embedded as one text, written
    beside its chunks' vectors for a file of two chunks or more (`document_vector_metadata`)."""
    return str(uuid.uuid5(_CHUNK_NAMESPACE, f"{document_id}:document"))


# The metadata key and value that mark a file's document vector (chunks carry no such key). Milvus
# and pgvector drop every key but `text`, `file_id` and `uuid`: there its id tells
# (`document_vector_id`), as it does for the document vectors earlier versions wrote with text "".
VECTOR_KIND_KEY = "vector_kind"
DOCUMENT_VECTOR_KIND = "document"
PROBE_VECTOR_KIND = "probe"  # `remove_first_write`'s one vector, deleted again at once (id `probe_vector_id`)
PROBE_TEXT = "LucidRAG: a vector written to learn whether this collection exists; it is deleted again."
PROBE_FILE_ID = "lucidrag-probe"  # the file id of `open_collection`'s probe vector (no file has it)
TOMBSTONE_VECTOR_KIND = "tombstone"  # `write_tombstone`'s one vector: its file failed or was deleted
TOMBSTONE_TEXT = ("LucidRAG: this file failed or was deleted while its vectors could not be removed; they are "
                  "removed, never answered.")


def probe_vector_id(file_id: str) -> str:
    """The id of the probe vector written for `file_id` (no chunk's: never taken for chunk 0)."""
    return chunk_uuid(file_id, -1)


@functools.lru_cache(maxsize=1 << 16)  # asked for every vector hit of every query
def tombstone_vector_id(file_id: str) -> str:
    """The id of the file's tombstone vector (no chunk's, nor its probe's)."""
    return chunk_uuid(file_id, -2)


def tombstone_vector_metadata(file_id: str) -> dict[str, Any]:
    return {"file_id": file_id, "uuid": tombstone_vector_id(file_id), "text": TOMBSTONE_TEXT,
            VECTOR_KIND_KEY: TOMBSTONE_VECTOR_KIND}


# `sweep_note_metadata`'s one vector under PROBE_FILE_ID: the file it names failed or was deleted where
# nothing durable in plugin storage says so, and vectors of it (a tombstone, a probe) may be left
SWEEP_NOTE_KIND = "sweep-note"
_SWEEP_NOTE_TEXT = ("LucidRAG: the vectors of file {file_id} are removed (it failed or was deleted while plugin "
                    "storage could not note it); this note goes with them.")
_SWEEP_NOTE_FILE = re.compile(r"^LucidRAG: the vectors of file (.+) are removed \(")


def sweep_note_id(file_id: str) -> str:
    """The id of the sweep note naming `file_id` (no chunk's, probe's nor tombstone's)."""
    return chunk_uuid(file_id, -3)


def sweep_note_metadata(file_id: str) -> dict[str, Any]:
    """A sweep note lives under PROBE_FILE_ID, which one listing finds whatever file it names, and
    names its file in its text, which every backend keeps."""
    return {"file_id": PROBE_FILE_ID, "uuid": sweep_note_id(file_id), "text": _SWEEP_NOTE_TEXT.format(file_id=file_id),
            VECTOR_KIND_KEY: SWEEP_NOTE_KIND}


def noted_file(item: dict[str, Any]) -> str | None:
    """The file a listed sweep note names (None: the item is no sweep note)."""
    match = _SWEEP_NOTE_FILE.match(str((item.get("metadata") or {}).get("text") or ""))
    return match.group(1) if match else None


def document_vector_metadata(file_id: str, text: str, name: str, file_format: str) -> dict[str, Any]:
    """Flat metadata of a file's document vector: the text it embeds (the file's title and
    opening), so that anyone opening the collection can tell what it is, and the mark."""
    meta: dict[str, Any] = {"file_id": file_id, "uuid": document_vector_id(file_id), "text": text,
                            VECTOR_KIND_KEY: DOCUMENT_VECTOR_KIND, "format": file_format}
    if name:
        meta["document_name"] = name
    return meta


def probe_vector_metadata(file_id: str) -> dict[str, Any]:
    return {"file_id": file_id, "uuid": probe_vector_id(file_id), "text": PROBE_TEXT,
            VECTOR_KIND_KEY: PROBE_VECTOR_KIND}


def is_chunk_vector(vector_id: object, metadata: Any) -> bool:
    """Whether a stored vector is one of a file's chunks: not its document vector, a probe, a sweep
    note nor a tombstone (by their mark, or by their id where the backend drops it or an earlier version
    wrote none)."""
    metadata = metadata if isinstance(metadata, dict) else {}
    if metadata.get(VECTOR_KIND_KEY) is not None:
        return False
    file_id = metadata.get("file_id")
    if file_id == PROBE_FILE_ID:  # probes and sweep notes (whose ids are no function of it)
        return False
    return file_id is None or str(vector_id) not in (
        document_vector_id(str(file_id)), probe_vector_id(str(file_id)), tombstone_vector_id(str(file_id)))


def is_document_vector(vector_id: object, metadata: Any) -> bool:
    """Whether a stored vector is a file's document vector, not a chunk: by its mark, or (backends
    that drop the mark, and collections written before it) by its id."""
    if not isinstance(metadata, dict):
        return False
    if metadata.get(VECTOR_KIND_KEY) == DOCUMENT_VECTOR_KIND:
        return True
    file_id = metadata.get("file_id")
    return file_id is not None and str(vector_id) == document_vector_id(str(file_id))


def file_vector_count(chunks: int) -> int:
    """How many vectors a file of `chunks` chunks has in the vector DB: one per chunk, and its
    document vector when it has two chunks or more."""
    return chunks + 1 if chunks > 1 else chunks


@dataclass(frozen=True)
class ChunkRecord:
    chunk_id: str
    file_id: str
    index: int
    text: str  # the embedded text: heading path + body
    heading: str = ""
    page: int | None = None
    parent: int | None = None
    document_name: str = ""  # the file's human title (FileRecord.name), repeated for each hit

    def metadata(self, file_format: str) -> dict[str, Any]:
        """Flat vector metadata (str/int/float/bool only; no None values for strict backends).
        `uuid` is required by LangBot's Milvus adapter (it fills the non-nullable `chunk_uuid`
        column from it; an insert without it is refused)."""
        meta: dict[str, Any] = {
            "file_id": self.file_id,
            "uuid": self.chunk_id,
            "text": self.text,
            "chunk_index": self.index,
            "heading": self.heading,
            "page": self.page if self.page is not None else 0,
            "format": file_format,
        }
        if self.parent is not None:
            meta["parent"] = self.parent
        if self.document_name:
            meta["document_name"] = self.document_name
        return meta


@dataclass
class FileRecord:
    file_id: str
    format: str
    chunks: list[ChunkRecord]
    parents: list[str] = field(default_factory=list)
    name: str = ""  # human title (see document.document_name); "" in records stored before it existed
    # What OCR did for the file (parsing/ocr.OcrTally.metadata: pages, confidence, pages with
    # nothing found, pictures); empty for files without scans or pictures, and in older records.
    ocr: dict[str, str | int] = field(default_factory=dict)
    # LangBot's storage key of the upload: the only name its file list shows for the file, kept so
    # the console can match its rows to LangBot's ("" in older records and records rebuilt from vectors).
    upload_key: str = ""

    def to_bytes(self) -> bytes:
        payload = {
            "v": RECORD_VERSION,
            "file_id": self.file_id,
            "format": self.format,
            "parents": self.parents,
            "name": self.name,
            "chunks": [[c.chunk_id, c.index, c.text, c.heading, c.page, c.parent] for c in self.chunks],
        }
        if self.ocr:
            payload["ocr"] = self.ocr
        if self.upload_key:
            payload["upload_key"] = self.upload_key
        return zlib.compress(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode(), 6)

    @classmethod
    def from_bytes(cls, blob: bytes) -> FileRecord:
        try:
            payload = json.loads(zlib.decompress(blob))
            if payload.get("v") != RECORD_VERSION:
                raise ValueError(f"unknown record version {payload.get('v')!r}")
            file_id = str(payload["file_id"])
            name = str(payload.get("name") or "")  # absent in records written before names existed
            chunks = [
                ChunkRecord(str(cid), file_id, int(idx), str(text), str(heading),
                            None if page is None else int(page), None if parent is None else int(parent),
                            name)
                for cid, idx, text, heading, page, parent in payload["chunks"]
            ]
            ocr = {str(k): v for k, v in (payload.get("ocr") or {}).items() if isinstance(v, (str, int))}
            return cls(file_id, str(payload["format"]), chunks, [str(p) for p in payload["parents"]], name, ocr,
                       str(payload.get("upload_key") or ""))
        except (zlib.error, ValueError, KeyError, TypeError) as error:
            raise ValueError(f"corrupt file record: {error}") from error

    @classmethod
    def from_vector_items(cls, file_id: str, items: list[dict[str, Any]]) -> FileRecord:
        """Rebuild from `vector_list` items. Backends that drop metadata (Milvus, pgvector) leave
        only text and file_id: order then falls back to the listing order and parents are lost."""
        chunks: list[ChunkRecord] = []
        file_format = ""
        name = ""
        for position, item in enumerate(items):
            meta = item.get("metadata") or {}
            text = meta.get("text") or item.get("document") or ""
            if not text or not is_chunk_vector(item.get("id"), meta):
                continue
            index = meta.get("chunk_index")
            page = meta.get("page")
            chunks.append(ChunkRecord(
                chunk_id=str(item.get("id")),
                file_id=file_id,
                index=int(index) if isinstance(index, (int, float)) else position,
                text=str(text),
                heading=str(meta.get("heading") or ""),
                page=int(page) if isinstance(page, (int, float)) and page else None,
                parent=None,
                document_name=str(meta.get("document_name") or ""),
            ))
            file_format = file_format or str(meta.get("format") or "")
            name = name or str(meta.get("document_name") or "")
        chunks.sort(key=lambda c: c.index)
        return cls(file_id, file_format, chunks, name=name)



def merge_rebuilt(stored: FileRecord, rebuilt: FileRecord) -> FileRecord:
    """A record rebuilt from the vector DB, made no worse than the stored one it would replace.

    The vectors decide which chunks exist and their text; a chunk the stored record has with the
    same id and text keeps everything else from there (order, heading, page, parent), which
    backends that drop metadata (Milvus, pgvector) cannot give back. Returns `stored` itself when
    the vectors hold exactly its chunks."""
    known = {c.chunk_id: c for c in stored.chunks}
    chunks = [known[c.chunk_id] if _same_text(known.get(c.chunk_id), c) else c for c in rebuilt.chunks]
    if len(chunks) == len(stored.chunks) and all(c is known.get(c.chunk_id) for c in chunks):
        return stored
    merged = sorted(chunks, key=lambda c: c.index)
    name = rebuilt.name or stored.name
    return FileRecord(rebuilt.file_id, rebuilt.format or stored.format,
                      [c if c.document_name == name else _renamed(c, name) for c in merged],
                      list(stored.parents) if any(c.parent is not None for c in merged) else [], name,
                      upload_key=stored.upload_key)


def _same_text(known: ChunkRecord | None, rebuilt: ChunkRecord) -> bool:
    return known is not None and known.text == rebuilt.text


def _renamed(chunk: ChunkRecord, name: str) -> ChunkRecord:
    return ChunkRecord(chunk.chunk_id, chunk.file_id, chunk.index, chunk.text, chunk.heading, chunk.page,
                       chunk.parent, name)
