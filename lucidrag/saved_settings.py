"""The creation settings a KB was created with, kept in plugin storage for the console.

The host passes creation settings only to `on_knowledge_base_create` and inside each ingest and
retrieve; a Page has no way to ask for them. They are saved raw (invalid values included, so the
console can flag them). Best effort: nothing here raises into a hook.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from .host import HostApi, describe
from .storage_keys import settings_key

logger = logging.getLogger(__name__)


def _flat(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    return {str(k): v for k, v in dict(raw or {}).items() if isinstance(v, (str, int, float, bool)) or v is None}


async def save_creation_settings(host: HostApi, kb_id: str, raw: Mapping[str, Any] | None) -> bool:
    try:
        await host.set_plugin_storage(settings_key(kb_id), json.dumps(_flat(raw), ensure_ascii=False).encode())
        return True
    except Exception as error:  # noqa: BLE001 - storage is best effort
        logger.warning("kb=%s: could not save the creation settings (%s)", kb_id, describe(error))
        return False


async def load_creation_settings(host: HostApi, kb_id: str) -> dict[str, Any] | None:
    """The saved settings, or None when none were saved (KB older than this) or storage failed."""
    try:
        raw = await host.get_plugin_storage(settings_key(kb_id))
        data = json.loads(raw) if raw else None
        return data if isinstance(data, dict) else None
    except Exception:  # noqa: BLE001 - a missing key raises on the real host
        return None
