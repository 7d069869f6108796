"""Errors the engine raises internally. Each message is written for the operator who uploaded
the file or configured the knowledge base: it says what happened and what to do about it.

The component layer catches `LucidRagError` once per hook and turns it into a FAILED ingestion
result, an empty retrieval or a `False` delete; nothing here ever reaches the host as an exception.
"""

from __future__ import annotations


class LucidRagError(Exception):
    """Base class: `str(error)` is the user-facing message."""


class SettingsError(LucidRagError):
    """A creation or retrieval setting has an invalid value."""


class ParseError(LucidRagError):
    """The file could not be turned into text (corrupt, encrypted, empty, unsupported...)."""


class UnsupportedFormatError(ParseError):
    """No parser handles this file type."""


class LimitExceeded(ParseError):
    """The file is legal but past a documented limit (lucidrag/base/limits.py); the message names it."""


class EmbeddingFailure(LucidRagError):
    """The host's embedding model failed or returned something unusable.

    `permanent` failures (wrong vector count, bad vectors) are not retried with a smaller batch.
    """

    def __init__(self, message: str, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class VectorStoreFailure(LucidRagError):
    """The host's vector database refused or failed an operation."""


class PluginStorageFailure(LucidRagError):
    """LangBot's plugin storage failed a write that had to succeed (a deletion or a commit that
    would not survive a restart otherwise)."""


class IngestTimedOut(LucidRagError):
    """An ingest's work did not finish in its time (what it wrote was rolled back)."""


class KnowledgeBaseDeleted(LucidRagError):
    """The knowledge base was deleted while a file was being ingested into it."""


class HostConnectionLost(LucidRagError):
    """The plugin's connection to LangBot dropped (LangBot restarted, the runtime disconnected)."""


class ReaderCrashed(ParseError):
    """The worker process reading the file died (a signal, an abort, out of memory); the plugin
    lives on and the message names the format's reader and why."""


class ReaderUnavailable(ParseError):
    """No worker process could be started to read the file (the plugin log says why)."""
