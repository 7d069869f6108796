"""The one place that knows how LucidRAG lays out its keys in LangBot's plugin storage.

Plugin storage has no KB dimension, so every key carries the KB id. Nothing outside this module
builds or parses a key.

    lucidrag/v1/kb/<kb>/meta              the KB's facts (distance metric, "has vectors")
    lucidrag/v1/kb/<kb>/file/<file>       a FileRecord (big ones in parts: <key>#0, #1, ...)
    lucidrag/v1/kb/<kb>/journal/<file>    an ingest that started writing vectors and has not
                                          committed yet (a crash leaves it behind); "0 chunks":
                                          a failed or deleted file whose leftovers a restart removes
    lucidrag/v1/kb/<kb>/failed/<file>     why a file failed to ingest (shown in the console)
    lucidrag/v1/kb/<kb>/settings          the KB's creation settings as last received (console)
    lucidrag/v1/kb/<kb>/kw/manifest       the keyword index snapshot: which segments are live
    lucidrag/v1/kb/<kb>/kw/seg/<name>     one immutable keyword-index segment (in parts #0, #1...)
    lucidrag/v1/kb/<kb>/qlog/<n>          block n of the KB's recent questions (querylog.py)
    lucidrag/v1/kb/<kb>/probes            the relevance cut's probe statistics (probestats.py)
    lucidrag/v1/pending-kb-delete/<kb>    a KB deletion that is not finished yet
"""

from __future__ import annotations

ROOT = "lucidrag/v1/"
_KB_ROOT = ROOT + "kb/"
_PENDING_KB_DELETE = ROOT + "pending-kb-delete/"


def kb_prefix(kb_id: str) -> str:
    return f"{_KB_ROOT}{kb_id}/"


def meta_key(kb_id: str) -> str:
    return kb_prefix(kb_id) + "meta"


def is_file_id(file_id: str) -> bool:
    """Whether `file_id` names one file in the keys: not empty, no "/" (a key's separator) and
    no "#" (a part's marker: "<file>#0" names part 0 of file <file>'s record)."""
    return bool(file_id) and "/" not in file_id and "#" not in file_id


def file_record_key(kb_id: str, file_id: str) -> str:
    return f"{kb_prefix(kb_id)}file/{file_id}"


def journal_key(kb_id: str, file_id: str) -> str:
    return f"{kb_prefix(kb_id)}journal/{file_id}"


def failure_key(kb_id: str, file_id: str) -> str:
    return f"{kb_prefix(kb_id)}failed/{file_id}"


def settings_key(kb_id: str) -> str:
    return kb_prefix(kb_id) + "settings"


def index_manifest_key(kb_id: str) -> str:
    return kb_prefix(kb_id) + "kw/manifest"


def index_segment_key(kb_id: str, name: str) -> str:
    return f"{kb_prefix(kb_id)}kw/seg/{name}"


def query_log_block_key(kb_id: str, number: int) -> str:
    return f"{kb_prefix(kb_id)}qlog/{number}"


def query_log_blocks(keys: list[str], kb_id: str) -> list[int]:
    """The numbers of the KB's stored query-log blocks, from a full key listing."""
    return sorted(int(n) for n in _ids_under(keys, kb_prefix(kb_id) + "qlog/") if n.isdigit())


def probe_stats_key(kb_id: str) -> str:
    return kb_prefix(kb_id) + "probes"


def kb_ids(keys: list[str]) -> list[str]:
    """Every KB that has anything in plugin storage, from a full key listing."""
    return sorted({k[len(_KB_ROOT):].split("/", 1)[0] for k in keys if k.startswith(_KB_ROOT)} - {""})


def pending_kb_delete_key(kb_id: str) -> str:
    return _PENDING_KB_DELETE + kb_id


def _ids_under(keys: list[str], prefix: str) -> list[str]:
    return sorted({k[len(prefix):] for k in keys if k.startswith(prefix) and "#" not in k[len(prefix):]})


def record_file_ids(keys: list[str], kb_id: str) -> list[str]:
    """File ids with a stored FileRecord, from a full key listing."""
    return _ids_under(keys, kb_prefix(kb_id) + "file/")


def journal_file_ids(keys: list[str], kb_id: str) -> list[str]:
    return _ids_under(keys, kb_prefix(kb_id) + "journal/")


def failure_file_ids(keys: list[str], kb_id: str) -> list[str]:
    return _ids_under(keys, kb_prefix(kb_id) + "failed/")


def pending_kb_deletes(keys: list[str]) -> list[str]:
    return _ids_under(keys, _PENDING_KB_DELETE)


def part_key(key: str, n: int) -> str:
    """Part `n` of a value stored in parts under `key` (store.KbStore)."""
    return f"{key}#{n}"


def stray_parts(keys: list[str], kb_id: str) -> list[str]:
    """Part keys of this KB whose value key is not in the listing: left by a write that died
    before its header, or by a delete that died after it. Nothing reads them any more."""
    prefix = kb_prefix(kb_id)
    present = {k for k in keys if k.startswith(prefix) and "#" not in k}
    return sorted(k for k in keys if k.startswith(prefix) and "#" in k and k.rpartition("#")[0] not in present)


def part_owner(part: str, kb_id: str) -> tuple[str, str]:
    """(kind, id) of the value a part key belongs to: ("file", file id), ("kw/seg", name), ..."""
    kind, _, ident = part.rpartition("#")[0][len(kb_prefix(kb_id)):].rpartition("/")
    return kind, ident


def keys_of_kb(keys: list[str], kb_id: str) -> list[str]:
    """Every key that belongs to one KB (its prefix and its pending-deletion marker)."""
    prefix, pending = kb_prefix(kb_id), pending_kb_delete_key(kb_id)
    return [k for k in keys if k.startswith(prefix) or k == pending]


KeyGroups = dict[tuple[str, str], list[str]]
"""(kb id, kind) -> ids, kind being "file", "journal", "failed", "kw/seg" or "qlog"."""


def group_keys(keys: list[str]) -> KeyGroups:
    """One pass over a full listing (tens of thousands of keys for a big KB): each KB's record,
    journal, failure and index-segment ids, parts (`#n`) left out."""
    groups: KeyGroups = {}
    root = len(_KB_ROOT)
    for key in keys:
        if not key.startswith(_KB_ROOT) or "#" in key:
            continue
        kb_id, _, rest = key[root:].partition("/")
        kind, _, ident = rest.rpartition("/")
        if kind and ident:
            groups.setdefault((kb_id, kind), []).append(ident)
    return groups
