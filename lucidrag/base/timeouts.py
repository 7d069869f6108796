"""How long LangBot waits for each KnowledgeEngine hook before it gives up on it.

Two clocks run per hook: LangBot's (host → runtime) and the plugin runtime's (runtime → plugin);
the plugin is bound by the shorter one. A timeout does not cancel the plugin's work: LangBot
records a failure while the plugin carries on (HOST_CONTRACT.md, "Timeouts").

Source: langbot-plugin 0.7.18, langbot_plugin/runtime/io/handlers/plugin.py
(`KNOWLEDGE_RETRIEVAL_TIMEOUT = 120.0`; INGEST_DOCUMENT `timeout=1200`; DELETE_DOCUMENT,
ON_KB_CREATE and ON_KB_DELETE `timeout=30`); LangBot 4.11.2 allows retrieve 180 s on its side.
"""

from __future__ import annotations

INGEST_TIMEOUT_S = 1200.0
RETRIEVE_TIMEOUT_S = 120.0  # the runtime's; LangBot's own is 180 s
DELETE_DOCUMENT_TIMEOUT_S = 30.0
KB_CREATE_TIMEOUT_S = 30.0
KB_DELETE_TIMEOUT_S = 30.0
