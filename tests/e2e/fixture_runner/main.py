"""Test-fixture plugin: one Runner component (components/runner/), no state of its own."""

from __future__ import annotations

from langbot_plugin.api.definition.plugin import BasePlugin


class KbPreviewRunnerPlugin(BasePlugin):
    async def initialize(self) -> None:
        pass
