"""Readers the tests put in place of `isolation.read_upload` (monkeypatch): pickled by name, they
run in the real parse workers, with read_upload's arguments (`splits_forever` replaces
`isolation.split_upload`, with its arguments). Where a reader needs a path (to say
it started, to be released), the upload's first line names it."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from lucidrag.base.settings import CreationSettings
from lucidrag.ingestion.chunking import ChunkedDocument
from lucidrag.ingestion.document import Document, Section
from lucidrag.ingestion.isolation import read_upload


def _path_and_rest(data: bytes) -> tuple[Path, bytes]:
    first, _, rest = data.partition(b"\n")
    return Path(first.decode()), rest


def splits_forever(document: Document, settings: CreationSettings, limits: dict[str, object]) -> ChunkedDocument:
    """In place of `isolation.split_upload`: writes its pid to the path on the text's first line,
    then never returns (a chunking that cannot finish)."""
    Path(document.sections[0].text.split("\n", 1)[0]).write_text(str(os.getpid()))
    while True:
        time.sleep(1)


def aborts(data: bytes, filename: str, mime_type: str, limits: dict[str, object]) -> Document:
    os.abort()


def hangs(data: bytes, filename: str, mime_type: str, limits: dict[str, object]) -> Document:
    """Writes its pid to the path on the upload's first line, then never returns."""
    path, _ = _path_and_rest(data)
    path.write_text(str(os.getpid()))
    while True:
        time.sleep(1)


def held(data: bytes, filename: str, mime_type: str, limits: dict[str, object]) -> Document:
    """Says it started (`<path>.<pid>.started`), waits until `<path>` exists, then reads the rest
    of the upload."""
    path, rest = _path_and_rest(data)
    Path(f"{path}.{os.getpid()}.{time.monotonic_ns()}.started").touch()
    while not path.exists():
        time.sleep(0.01)
    return read_upload(rest, filename, mime_type, limits)


def prints(data: bytes, filename: str, mime_type: str, limits: dict[str, object]) -> Document:
    """Writes to its stdout and stderr every way a library might, then reads the upload."""
    print("printed by a parse worker")
    sys.stderr.write("written to stderr by a parse worker\n")
    os.write(1, b"written to fd 1 by a parse worker\n")
    os.write(2, b"written to fd 2 by a parse worker\n")
    return read_upload(data, filename, mime_type, limits)


def environment(data: bytes, filename: str, mime_type: str, limits: dict[str, object]) -> Document:
    """The worker's environment as the document's text."""
    text = "\n".join(f"{name}={value}" for name, value in sorted(os.environ.items()))
    return Document(sections=(Section(text=text or "(empty)"),), format="text")


def allocates(data: bytes, filename: str, mime_type: str, limits: dict[str, object]) -> Document:
    """Asks for more memory than a worker may use (calloc: no page is touched where it succeeds)."""
    memory = bytes((int(limits["PARSE_WORKER_MEMORY_MIB"]) + 512) << 20)  # type: ignore[call-overload]
    return Document(sections=(Section(text=f"allocated {len(memory)} bytes"),), format="text")


def pid(data: bytes, filename: str, mime_type: str, limits: dict[str, object]) -> Document:
    """The worker's pid as the document's text."""
    return Document(sections=(Section(text=str(os.getpid())),), format="text")


def logs(data: bytes, filename: str, mime_type: str, limits: dict[str, object]) -> Document:
    """Logs a warning (as a parser does for a damaged part), then reads the upload."""
    import logging

    logging.getLogger("lucidrag.ingestion.parsing.registry").warning("a sheet was skipped by a parse worker")
    return read_upload(data, filename, mime_type, limits)
