"""The LucidRAG console page: LangBot serves console.html in its sidebar (Plugin Pages) and
forwards the page's `langbot.api(...)` calls here. The logic is in lucidrag/console.py.

Errors are answered as data (`{"error": ...}`), not `PageResponse.fail`: LangBot turns a failed
page call into HTTP 400 and the page would only see the HTTP status, not the operator's message.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

import yaml

from langbot_plugin.api.definition.components.page import (
    Page,
    PageRequest,
    PageResponse,
)

from components.knowledge_engine.lucid_rag import DEFAULT_INSTALLATION
from lucidrag.console import Console, ConsoleError

logger = logging.getLogger(__name__)

ENGINE_YAML = Path(__file__).resolve().parents[2] / "knowledge_engine" / "lucid_rag.yaml"


@functools.cache
def creation_schema() -> tuple[dict[str, Any], ...]:
    """The engine's creation settings as LangBot's form shows them (labels per language)."""
    try:
        spec = yaml.safe_load(ENGINE_YAML.read_text(encoding="utf-8"))["spec"]
        return tuple(spec.get("creation_schema") or ())
    except (OSError, yaml.YAMLError, KeyError, TypeError) as error:
        logger.warning("console: no setting labels (%s)", error)
        return ()


class LucidRagConsole(Page):
    def _installation_id(self) -> str:
        binding = self.get_installation_binding()
        return str(getattr(binding, "installation_uuid", "") or DEFAULT_INSTALLATION)

    async def handle_api(self, request: PageRequest) -> PageResponse:
        console = Console(self.plugin, self.plugin.engine, self._installation_id(),  # type: ignore[arg-type, attr-defined]
                          creation_schema())
        try:
            return PageResponse.ok(await console.handle(request.endpoint, request.body))
        except ConsoleError as error:
            return PageResponse.ok({"error": str(error)})
        except Exception as error:  # noqa: BLE001 - the page must get an answer, the host no exception
            logger.exception("console %s failed", request.endpoint)
            return PageResponse.ok({"error": f"Unexpected error ({type(error).__name__}: {error}). "
                                             "Please report this to the plugin's maintainers."})
