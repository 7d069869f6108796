"""Typed knowledge-base settings, parsed once from the loose dicts the LangBot UI sends.

The host validates nothing but `required`, so every type, range and cross-field check lives here.
Each default is defined once, in `CREATION_DEFAULTS` / `RETRIEVAL_DEFAULTS`; a test checks that the
component YAML declares the same defaults.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from lucidrag.base.errors import SettingsError

ChunkingMode = Literal["structure", "fixed", "parent_child"]
SearchMode = Literal["hybrid", "vector", "keyword"]
QueryLogMode = Literal["text", "hash", "off"]
RelevanceCut = Literal["auto", "off"]

CHUNKING_MODES: tuple[str, ...] = ("structure", "fixed", "parent_child")
SEARCH_MODES: tuple[str, ...] = ("hybrid", "vector", "keyword")
QUERY_LOG_MODES: tuple[str, ...] = ("text", "hash", "off")  # what the console's query log keeps
# "auto": a question the knowledge base does not answer gets no passages (retrieval/relevance.py)
RELEVANCE_CUTS: tuple[str, ...] = ("auto", "off")

MIN_CHUNK_SIZE = 64
MAX_CHUNK_SIZE = 8000
MAX_TOP_K = 50
MAX_CONTEXT_WINDOW = 3
MIN_QUERY_LOG_SIZE = 10
MAX_QUERY_LOG_SIZE = 10_000

CREATION_DEFAULTS: dict[str, Any] = {
    "chunking": "structure",
    "chunk_size": 512,
    "chunk_overlap": 64,
    "vision_model_uuid": "",
}
RETRIEVAL_DEFAULTS: dict[str, Any] = {
    "top_k": 5,
    "search_mode": "hybrid",
    "vector_weight": 0.5,
    "score_threshold": 0.0,
    "rerank_model_uuid": "",
    "context_window": 0,
    "query_log": "text",
    "query_log_size": 1000,
    "source_line": True,
    "relevance_cut": "auto",
}


@dataclass(frozen=True)
class CreationSettings:
    embedding_model_uuid: str
    chunking: ChunkingMode = CREATION_DEFAULTS["chunking"]
    chunk_size: int = CREATION_DEFAULTS["chunk_size"]
    chunk_overlap: int = CREATION_DEFAULTS["chunk_overlap"]
    vision_model_uuid: str = CREATION_DEFAULTS["vision_model_uuid"]  # "" = pictures are not described

    @property
    def parent_size(self) -> int:
        """Largest parent section returned in parent_child mode (children are chunk_size)."""
        return min(MAX_CHUNK_SIZE, self.chunk_size * 4)


@dataclass(frozen=True)
class RetrievalSettings:
    top_k: int = RETRIEVAL_DEFAULTS["top_k"]
    search_mode: SearchMode = RETRIEVAL_DEFAULTS["search_mode"]
    vector_weight: float = RETRIEVAL_DEFAULTS["vector_weight"]
    score_threshold: float = RETRIEVAL_DEFAULTS["score_threshold"]
    rerank_model_uuid: str = RETRIEVAL_DEFAULTS["rerank_model_uuid"]
    context_window: int = RETRIEVAL_DEFAULTS["context_window"]
    query_log: QueryLogMode = RETRIEVAL_DEFAULTS["query_log"]
    query_log_size: int = RETRIEVAL_DEFAULTS["query_log_size"]
    # each passage's content starts with its source (document, heading path, page)
    source_line: bool = RETRIEVAL_DEFAULTS["source_line"]
    # whether a question no passage answers gets nothing (independent of score_threshold)
    relevance_cut: RelevanceCut = RETRIEVAL_DEFAULTS["relevance_cut"]


def parse_creation_settings(raw: Mapping[str, Any] | None) -> CreationSettings:
    raw = dict(raw or {})
    model = _as_str(raw.get("embedding_model_uuid"), "embedding_model_uuid")
    if not model:
        raise SettingsError(
            "No embedding model is set for this knowledge base. Choose an embedding model when "
            "creating it (Models → Embedding to add one first)."
        )
    chunking = _as_choice(raw.get("chunking", CREATION_DEFAULTS["chunking"]), "chunking", CHUNKING_MODES)
    size = _as_int(raw.get("chunk_size", CREATION_DEFAULTS["chunk_size"]), "chunk_size")
    overlap = _as_int(raw.get("chunk_overlap", CREATION_DEFAULTS["chunk_overlap"]), "chunk_overlap")
    if not MIN_CHUNK_SIZE <= size <= MAX_CHUNK_SIZE:
        raise SettingsError(
            f"chunk_size ({size}) must be between {MIN_CHUNK_SIZE} and {MAX_CHUNK_SIZE} characters."
        )
    if overlap < 0:
        raise SettingsError(f"chunk_overlap ({overlap}) must not be negative.")
    if overlap >= size:
        raise SettingsError(f"chunk_overlap ({overlap}) must be smaller than chunk_size ({size}).")
    if overlap > size // 2:
        raise SettingsError(
            f"chunk_overlap ({overlap}) must be at most half of chunk_size ({size}); "
            "a larger overlap stores most text twice."
        )
    vision = _as_str(raw.get("vision_model_uuid") or "", "vision_model_uuid")
    return CreationSettings(model, chunking, size, overlap, vision)  # type: ignore[arg-type]


def parse_retrieval_settings(raw: Mapping[str, Any] | None) -> RetrievalSettings:
    raw = {k: v for k, v in dict(raw or {}).items() if v is not None}
    top_k = _as_int(raw.get("top_k", RETRIEVAL_DEFAULTS["top_k"]), "top_k")
    if not 1 <= top_k <= MAX_TOP_K:
        raise SettingsError(f"top_k ({top_k}) must be between 1 and {MAX_TOP_K}.")
    mode = _as_choice(raw.get("search_mode", RETRIEVAL_DEFAULTS["search_mode"]), "search_mode", SEARCH_MODES)
    weight = _as_float(raw.get("vector_weight", RETRIEVAL_DEFAULTS["vector_weight"]), "vector_weight")
    if not 0.0 <= weight <= 1.0:
        raise SettingsError(f"vector_weight ({weight}) must be between 0.0 and 1.0.")
    threshold = _as_float(raw.get("score_threshold", RETRIEVAL_DEFAULTS["score_threshold"]), "score_threshold")
    if not 0.0 <= threshold <= 1.0:
        raise SettingsError(
            f"score_threshold ({threshold}) must be between 0.0 (off) and 1.0; "
            "scores are similarities, higher is better."
        )
    rerank = _as_str(raw.get("rerank_model_uuid", ""), "rerank_model_uuid")
    window = _as_int(raw.get("context_window", RETRIEVAL_DEFAULTS["context_window"]), "context_window")
    if not 0 <= window <= MAX_CONTEXT_WINDOW:
        raise SettingsError(f"context_window ({window}) must be between 0 and {MAX_CONTEXT_WINDOW}.")
    log = _as_choice(raw.get("query_log", RETRIEVAL_DEFAULTS["query_log"]), "query_log", QUERY_LOG_MODES)
    log_size = _as_int(raw.get("query_log_size", RETRIEVAL_DEFAULTS["query_log_size"]), "query_log_size")
    if not MIN_QUERY_LOG_SIZE <= log_size <= MAX_QUERY_LOG_SIZE:
        raise SettingsError(f"query_log_size ({log_size}) must be between {MIN_QUERY_LOG_SIZE} and "
                            f"{MAX_QUERY_LOG_SIZE}.")
    source_line = _as_bool(raw.get("source_line", RETRIEVAL_DEFAULTS["source_line"]), "source_line")
    cut = _as_choice(raw.get("relevance_cut", RETRIEVAL_DEFAULTS["relevance_cut"]), "relevance_cut", RELEVANCE_CUTS)
    return RetrievalSettings(top_k, mode, weight, threshold, rerank, window, log, log_size,  # type: ignore[arg-type]
                             source_line, cut)  # type: ignore[arg-type]


def _as_int(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise SettingsError(f"{name} must be a whole number, got {value!r}.")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise SettingsError(f"{name} must be a whole number, got {value!r}.")


def _as_bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, (str, int)) else ""
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise SettingsError(f"{name} must be true or false, got {value!r}.")


def _as_float(value: Any, name: str) -> float:
    if isinstance(value, bool):
        raise SettingsError(f"{name} must be a number, got {value!r}.")
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise SettingsError(f"{name} must be a number, got {value!r}.") from None
    if not math.isfinite(number):
        raise SettingsError(f"{name} must be a finite number, got {value!r}.")
    return number


def _as_str(value: Any, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SettingsError(f"{name} must be text, got {value!r}.")
    return value.strip()


def _as_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    text = _as_str(value, name).lower()
    if text not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(choices)}; got {value!r}.")
    return text


@dataclass(frozen=True)
class SettingProblem:
    """One invalid setting, for the console and the FAILED-upload message."""

    name: str
    value: Any
    valid: str  # the valid range or choices, e.g. "64-8000"
    message: str


def creation_problems(raw: Mapping[str, Any] | None) -> list[SettingProblem]:
    """Every invalid creation setting (parse_creation_settings stops at the first)."""
    raw = dict(raw or {})
    problems: list[SettingProblem] = []

    def check(name: str, valid: str, parse: Any) -> Any:
        try:
            return parse()
        except SettingsError as error:
            problems.append(SettingProblem(name, raw.get(name), valid, str(error)))
            return None

    model = check("embedding_model_uuid", "an embedding model",
                  lambda: _as_str(raw.get("embedding_model_uuid"), "embedding_model_uuid"))
    if model == "":
        problems.append(SettingProblem("embedding_model_uuid", raw.get("embedding_model_uuid"),
                                       "an embedding model", "No embedding model is set."))
    check("chunking", ", ".join(CHUNKING_MODES),
          lambda: _as_choice(raw.get("chunking", CREATION_DEFAULTS["chunking"]), "chunking", CHUNKING_MODES))
    size_range = f"{MIN_CHUNK_SIZE}-{MAX_CHUNK_SIZE}"
    size = check("chunk_size", size_range,
                 lambda: _as_int(raw.get("chunk_size", CREATION_DEFAULTS["chunk_size"]), "chunk_size"))
    if size is not None and not MIN_CHUNK_SIZE <= size <= MAX_CHUNK_SIZE:
        problems.append(SettingProblem("chunk_size", size, size_range,
                                       f"chunk_size ({size}) must be between {MIN_CHUNK_SIZE} and "
                                       f"{MAX_CHUNK_SIZE} characters."))
        size = None
    overlap_range = f"0-{size // 2}" if size is not None else "0 to half of chunk_size"
    overlap = check("chunk_overlap", overlap_range,
                    lambda: _as_int(raw.get("chunk_overlap", CREATION_DEFAULTS["chunk_overlap"]), "chunk_overlap"))
    if overlap is not None and (overlap < 0 or (size is not None and overlap > size // 2)):
        problems.append(SettingProblem("chunk_overlap", overlap, overlap_range,
                                       f"chunk_overlap ({overlap}) must be in the range {overlap_range} "
                                       "(at most half of chunk_size)."))
    return problems


def invalid_creation_message(first_error: str, problems: list[SettingProblem]) -> str:
    """What a FAILED upload says when the KB itself was created with invalid settings: the bad
    setting, its valid range, and what to do (creation settings cannot be edited)."""
    valid = "; ".join(f"{p.name} {p.valid}" for p in problems)
    return (f"This knowledge base was created with invalid settings: {first_error} Valid values: "
            f"{valid}. Creation settings cannot be changed after creation: create a new LucidRAG "
            "knowledge base with valid values and upload the files there.")
