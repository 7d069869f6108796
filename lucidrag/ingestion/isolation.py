"""The boundary between the plugin and all work on an upload's content.

    parse_upload(data, filename, mime_type, kb_id) -> Document
    chunk_upload(document, settings, kb_id) -> ChunkedDocument

The file is read by `read_upload` -- `parse_file` (parsers, OCR, archive and office unpacking,
picture decoding) under the limits in force here -- in a worker process (base/workers.py), and its
Document, once pictures are described, is cut into chunks by `split_upload` (`chunk_document`) in
one too. Plain data crosses: the bytes, the name, the MIME type, the KB's settings and
`lucidrag.base.limits`' values in; the parsed Document and the chunks (dataclasses of str, int,
bytes) out. A worker that dies fails this one file with a message naming the format's reader (or
the text splitter); cancelling either call (the ingest's deadline, its hook cancelled, its KB
deleted) kills the worker.
"""

from __future__ import annotations

from typing import Any

from lucidrag.base import limits, workers
from lucidrag.base.errors import ReaderCrashed, ReaderUnavailable
from lucidrag.base.settings import CreationSettings
from lucidrag.ingestion.chunking import ChunkedDocument, chunk_document
from lucidrag.ingestion.document import Document
from lucidrag.ingestion.parsing import detect, parse_file

_READERS = {
    "pdf": "PDF reader", "docx": "Word document reader", "pptx": "PowerPoint reader",
    "spreadsheet": "spreadsheet reader", "delimited": "CSV reader", "html": "web page reader",
    "markdown": "Markdown reader", "json": "JSON reader", "text": "text reader",
    "zip": "archive reader", "image": "picture reader (OCR)",
}
_LIMIT_TYPES = (int, float, str, bool, tuple, frozenset)

workers.preload_in_workers(__name__)


_SPLITTER = "text splitter"


def read_upload(data: bytes, filename: str, mime_type: str, limits_in_force: dict[str, object]) -> Document:
    """In a worker: `parse_file` under the plugin's limits (tests may have changed them)."""
    _apply(limits_in_force)
    return parse_file(data, filename, mime_type)


def split_upload(document: Document, settings: CreationSettings,
                 limits_in_force: dict[str, object]) -> ChunkedDocument:
    """In a worker: `chunk_document` under the plugin's limits."""
    _apply(limits_in_force)
    return chunk_document(document, settings)


def _apply(limits_in_force: dict[str, object]) -> None:
    for name, value in limits_in_force.items():
        setattr(limits, name, value)


async def parse_upload(data: bytes, filename: str, mime_type: str, kb_id: str) -> Document:
    """The Document of an upload, read in a worker process (the lane: by `kb_id` and size)."""
    job = workers.WorkerJob(read_upload, (data, filename, mime_type, limits_in_force()), owner=kb_id,
                            size=len(data))
    return await _run(job, reader_of(filename, mime_type))


async def chunk_upload(document: Document, settings: CreationSettings, kb_id: str) -> ChunkedDocument:
    """The chunks of an upload's Document, cut in a worker process (the lane: by `kb_id` and
    the document's characters)."""
    job = workers.WorkerJob(split_upload, (document, settings, limits_in_force()), owner=kb_id,
                            size=sum(len(section.text) for section in document.sections))
    return await _run(job, _SPLITTER)


async def _run(job: workers.WorkerJob, reader: str) -> Any:
    try:
        return await workers.run_job(job)
    except workers.WorkerCrashed as crash:
        raise ReaderCrashed(crash_message(reader, crash)) from None
    except MemoryError:
        raise ReaderCrashed(out_of_memory_message(reader)) from None
    except workers.WorkerUnavailable:
        raise ReaderUnavailable(
            "LucidRAG could not start the process that reads uploaded files (the plugin log says why). "
            "Upload the file again; if it keeps failing, restart the plugin in LangBot.") from None


def limits_in_force() -> dict[str, object]:
    return {name: value for name, value in vars(limits).items()
            if name.isupper() and isinstance(value, _LIMIT_TYPES)}


def reader_of(filename: str, mime_type: str) -> str:
    """The reader a file of this name and type goes to (from its name and type alone: this side
    of the boundary reads none of its bytes)."""
    return _READERS.get(detect(b"", filename, mime_type)[0], "file reader")


def crash_message(reader: str, crash: workers.WorkerCrashed) -> str:
    if crash.signal_name == "SIGKILL":
        why = "it was killed by the system, most often for using too much memory"
    elif crash.signal_name == "SIGABRT":
        why = ("it was stopped by signal 6, SIGABRT, which is what a reader does when it cannot get "
               f"the memory it asks for within the {limits.PARSE_WORKER_MEMORY_MIB:,} MiB it may use")
    elif crash.signal_name:
        why = f"it was stopped by {crash.signal_name}"
    else:
        why = f"its process exited with code {crash.exit_code}"
    return (f"The {reader} crashed while reading this file ({why}). The file may be damaged or built to use "
            "too much memory: open it, save it again or split it, then upload it again.")


def out_of_memory_message(reader: str) -> str:
    return (f"The {reader} ran out of memory while reading this file (it may use "
            f"{limits.PARSE_WORKER_MEMORY_MIB:,} MiB). The file may be damaged or built to use too much "
            "memory: open it, save it again or split it, then upload it again.")
