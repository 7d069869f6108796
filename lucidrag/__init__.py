"""LucidRAG: the knowledge-base engine behind the LangBot plugin, testable without a host."""

__version__ = "0.3.0"
