"""LucidRAG plugin entry point. The plugin object owns the engine; the component reaches it as
`self.plugin.engine`, so `on_installation_revoked` can drop that installation's state."""

from __future__ import annotations

import logging

from langbot_plugin.api.definition.plugin import BasePlugin

import lucidrag
from lucidrag.engine import Engine

logger = logging.getLogger(__name__)


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
