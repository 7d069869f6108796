"""LucidRAG plugin entry point. The plugin object owns the engine; the component reaches it as
`self.plugin.engine`, so `on_installation_revoked` can drop that installation's state."""

from __future__ import annotations

import logging

from langbot_plugin.api.definition.plugin import BasePlugin
from langbot_plugin.entities.io.actions.enums import PluginToRuntimeAction

import lucidrag
from lucidrag.engine import Engine

logger = logging.getLogger(__name__)

# The SDK's get_knowledge_file_stream waits 15 s for the whole upload to cross LangBot -> runtime ->
# plugin in 16 KB round trips; with 8 uploads of a few MB at once that is too short, and a retry
# starts the transfer over. The ingest has 1,200 s in all.
FILE_TRANSFER_TIMEOUT_S = 300.0


class LucidRagPlugin(BasePlugin):
    def __init__(self) -> None:
        super().__init__()
        self.engine = Engine()

    async def initialize(self) -> None:
        logger.info("LucidRAG %s loaded", lucidrag.__version__)

    async def on_installation_revoked(self, binding) -> None:  # type: ignore[no-untyped-def]
        """Drop the revoked installation's caches and KB state (no host API calls allowed here)."""
        installation_id = str(getattr(binding, "installation_uuid", "") or "")
        self.engine.revoke(installation_id)

    async def get_knowledge_file_stream(self, storage_path: str) -> bytes:
        """The SDK's own implementation, with a timeout that fits a large file."""
        handler = self.plugin_runtime_handler
        response = await handler.call_action(
            PluginToRuntimeAction.GET_KNOWLEDEGE_FILE_STREAM,
            {"storage_path": storage_path},
            timeout=FILE_TRANSFER_TIMEOUT_S,
        )
        file_key = response["file_key"]
        data = await handler.read_local_file(file_key)
        await handler.delete_local_file(file_key)
        return data
