"""The creation settings a KB was created with, kept in plugin storage for the console.

The host passes creation settings only to `on_knowledge_base_create` and inside each ingest and
retrieve; a Page has no way to ask for them. They are saved raw (invalid values included, so the
console can flag them). Best effort: nothing here raises into a hook.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lucidrag.base.host import HostApi
from lucidrag.state.storage_keys import settings_key
from lucidrag.state.store import get_value, put_value


def _flat(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    return {str(k): v for k, v in dict(raw or {}).items() if isinstance(v, (str, int, float, bool)) or v is None}


async def save_creation_settings(host: HostApi, kb_id: str, raw: Mapping[str, Any] | None) -> bool:
    return await put_value(host, settings_key(kb_id), json.dumps(_flat(raw), ensure_ascii=False).encode(),
                           f"the creation settings of kb {kb_id}")


async def load_creation_settings(host: HostApi, kb_id: str) -> dict[str, Any] | None:
    """The saved settings, or None when none were saved (KB older than this) or storage failed."""
    raw = await get_value(host, settings_key(kb_id))
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
