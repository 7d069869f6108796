"""Which knowledge bases a tool call may read, decided afresh on every call, failing closed:

    allowed = LangBot's knowledge bases for the calling query ∩ this installation's LucidRAG KBs

The first set comes only from the query reference LangBot handed the call (LIST_PIPELINE_
KNOWLEDGE_BASES: the KBs the calling pipeline's runner may retrieve from for that query); no
parameter of a tool can name a query, pipeline or installation. It is never cached: a pipeline's
KBs can change between two turns. The second set is this installation's: a KB is ours when this
installation's plugin storage holds its creation settings (saved at creation and with its
uploads), or the host has routed its hooks to this installation (its state is in memory); a
positive answer is kept as that state, a negative one for a minute.

Anything short of a clear answer (no query, a host error or timeout, an empty set, a KB of
another engine or installation, a storage failure) leaves the KB out, and a call left with none
is refused with a message the model can read. The unscoped list_knowledge_bases /
retrieve_knowledge are never used here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from lucidrag.base.host import HostApi, describe
from lucidrag.engine import Installation
from lucidrag.state.storage_keys import settings_key
from lucidrag.state.store import StorageReadFailed, read_value

logger = logging.getLogger(__name__)

NOT_OURS_RECHECK_S = 60.0  # how long a KB found not to be ours is taken as such

NO_KNOWLEDGE_BASE = ("No LucidRAG knowledge base is available to this bot here, so nothing was searched. "
                     "Answer from what you already know, or say that the knowledge base cannot be searched now.")
NOT_AVAILABLE = "That knowledge base is not available here. Knowledge bases you may use: {names}."


class ToolRefusal(Exception):
    """`str(error)` is the tool's answer: what the model reads instead of results."""


class QueryHost(Protocol):
    """LangBot's actions bound to the query the tool call belongs to. The host checks the KB
    against that query's set again on every retrieve."""

    async def pipeline_knowledge_bases(self) -> list[Any]: ...

    async def retrieve(self, kb_id: str, query: str, top_k: int,
                       filters: dict[str, Any] | None) -> list[Any]: ...


@dataclass(frozen=True)
class KbRef:
    kb_id: str
    name: str
    description: str

    @property
    def label(self) -> str:
        return self.name or self.kb_id


def has_query(query_id: Any, query_uuid: Any) -> bool:
    """Whether the host passed a reference to a pipeline query (a call outside one has none, or
    the legacy id -1 that LangBot gives an action without a query)."""
    if isinstance(query_uuid, str) and query_uuid:
        return True
    return isinstance(query_id, int) and not isinstance(query_id, bool) and query_id >= 0


async def allowed_knowledge_bases(query_host: QueryHost, host: HostApi, inst: Installation) -> list[KbRef]:
    try:
        listed = await query_host.pipeline_knowledge_bases()
    except Exception as error:  # noqa: BLE001 - fail closed, whatever went wrong
        logger.info("tool: LangBot did not say which knowledge bases this query may use (%s)", describe(error))
        raise ToolRefusal(NO_KNOWLEDGE_BASE) from error
    refs: list[KbRef] = []
    for kb in listed if isinstance(listed, list) else []:
        kb_id = kb.get("uuid") if isinstance(kb, Mapping) else None
        if isinstance(kb_id, str) and kb_id and await is_ours(host, inst, kb_id):
            refs.append(KbRef(kb_id, str(kb.get("name") or ""), str(kb.get("description") or "")))
    if not refs:
        raise ToolRefusal(NO_KNOWLEDGE_BASE)
    return refs


async def is_ours(host: HostApi, inst: Installation, kb_id: str) -> bool:
    """A LucidRAG KB of this installation. Whatever the host routed to this installation's hooks
    (its state in `inst.kbs`) or this process saved settings for is; otherwise its creation
    settings in this installation's storage decide."""
    if kb_id in inst.deleted_kbs:
        return False
    if kb_id in inst.kbs or kb_id in inst.settings_saved:
        return True
    if inst.foreign_kbs.get(kb_id, 0.0) > time.monotonic():
        return False
    try:
        ours = await read_value(host, settings_key(kb_id)) is not None
    except StorageReadFailed as error:  # unknown: not this call, asked again by the next
        logger.info("tool: kb=%s: plugin storage did not answer (%s)", kb_id, error)
        return False
    if not ours:  # (a KB that is: its reads or its retrieve hook put its state in `inst.kbs`)
        inst.foreign_kbs[kb_id] = time.monotonic() + NOT_OURS_RECHECK_S
    return ours


def chosen(allowed: list[KbRef], wanted: str) -> list[KbRef]:
    """The allowed KBs the model named (by id, or by name ignoring case); all of them when it
    named none. A name outside the set is refused without saying whether it exists."""
    if not wanted:
        return allowed
    picked = ([r for r in allowed if r.kb_id == wanted]
              or [r for r in allowed if r.name.casefold() == wanted.casefold()])
    if not picked:
        raise ToolRefusal(NOT_AVAILABLE.format(names=names(allowed)))
    return picked


def names(refs: list[KbRef]) -> str:
    return ", ".join(f'"{r.label}"' for r in refs)
