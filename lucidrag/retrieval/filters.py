"""Validation of the Chroma-style metadata filters a pipeline may pass to retrieve.

Chroma refuses a `where` with several top-level keys, so those are wrapped in `$and`. Unknown
operators are rejected here with a readable message instead of failing deep inside the backend.
The same filter is also evaluated locally (`matches`) for keyword-only candidates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lucidrag.base.errors import SettingsError

_LOGICAL = ("$and", "$or")
_COMPARISON = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
_SCALAR = (str, int, float, bool)


def normalise_filters(filters: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Return a backend-ready `where` dict, or None for no filter."""
    if not filters:
        return None
    if not isinstance(filters, Mapping):
        raise SettingsError(f"filters must be an object like {{\"file_id\": \"...\"}}, got {filters!r}.")
    clauses = [_clause(key, value) for key, value in filters.items()]
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def _clause(key: str, value: Any) -> dict[str, Any]:
    if key in _LOGICAL:
        if not isinstance(value, list) or not value:
            raise SettingsError(f"filter {key} needs a non-empty list of conditions.")
        parts = [normalise_filters(v) for v in value]
        return {key: [p for p in parts if p]}
    if key.startswith("$"):
        raise SettingsError(
            f"Unknown filter operator {key}. Use field names at the top level, combined with $and/$or."
        )
    if isinstance(value, Mapping):
        if len(value) != 1:
            raise SettingsError(f"filter on {key} must have exactly one operator, got {list(value)}.")
        op, operand = next(iter(value.items()))
        if op not in _COMPARISON:
            raise SettingsError(
                f"Unknown filter operator {op} on {key}. Supported: {', '.join(_COMPARISON)}."
            )
        if op in ("$in", "$nin"):
            if not isinstance(operand, list) or not all(isinstance(v, _SCALAR) for v in operand):
                raise SettingsError(f"filter {key} {op} needs a list of values.")
        elif not isinstance(operand, _SCALAR):
            raise SettingsError(f"filter {key} {op} needs a single text or number value.")
        return {key: {op: operand}}
    if not isinstance(value, _SCALAR):
        raise SettingsError(f"filter value for {key} must be text, a number or true/false.")
    return {key: {"$eq": value}}


def matches(where: Mapping[str, Any] | None, metadata: Mapping[str, Any]) -> bool:
    """Evaluate a normalised filter against one chunk's metadata."""
    if not where:
        return True
    for key, value in where.items():
        if key == "$and":
            if not all(matches(v, metadata) for v in value):
                return False
        elif key == "$or":
            if not any(matches(v, metadata) for v in value):
                return False
        else:
            op, operand = next(iter(value.items())) if isinstance(value, Mapping) else ("$eq", value)
            if not _compare(metadata.get(key), op, operand):
                return False
    return True


def _compare(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return actual == operand
    if op == "$ne":
        return actual != operand
    if op == "$in":
        return actual in operand
    if op == "$nin":
        return actual not in operand
    if actual is None or isinstance(actual, bool) != isinstance(operand, bool):
        return False
    try:
        return {"$gt": actual > operand, "$gte": actual >= operand,
                "$lt": actual < operand, "$lte": actual <= operand}[op]
    except TypeError:
        return False
