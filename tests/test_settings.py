import re
from pathlib import Path

import pytest
import yaml

from lucidrag.base.errors import SettingsError
from lucidrag.base.settings import (
    CREATION_DEFAULTS,
    MAX_CHUNK_SIZE,
    MAX_CONTEXT_WINDOW,
    MAX_QUERY_LOG_SIZE,
    MAX_TOP_K,
    MIN_CHUNK_SIZE,
    MIN_QUERY_LOG_SIZE,
    RETRIEVAL_DEFAULTS,
    parse_creation_settings,
    parse_retrieval_settings,
)

COMPONENT_YAML = Path(__file__).resolve().parent.parent / "components/knowledge_engine/lucid_rag.yaml"


def test_creation_defaults_apply_when_ui_sends_only_the_model():
    s = parse_creation_settings({"embedding_model_uuid": "m"})
    assert (s.chunking, s.chunk_size, s.chunk_overlap) == ("structure", 512, 64)


def test_numbers_typed_as_text_are_accepted():
    s = parse_creation_settings({"embedding_model_uuid": "m", "chunk_size": "800", "chunk_overlap": " 80 "})
    assert (s.chunk_size, s.chunk_overlap) == (800, 80)


@pytest.mark.parametrize("raw, message", [
    ({}, "No embedding model is set"),
    ({"embedding_model_uuid": "m", "chunk_overlap": 600}, r"chunk_overlap \(600\) must be smaller than chunk_size \(512\)"),
    ({"embedding_model_uuid": "m", "chunk_size": "big"}, "chunk_size must be a whole number, got 'big'"),
    ({"embedding_model_uuid": "m", "chunk_size": 10}, r"chunk_size \(10\) must be between 64 and 8000"),
    ({"embedding_model_uuid": "m", "chunk_overlap": -1}, "must not be negative"),
    ({"embedding_model_uuid": "m", "chunking": "semantic"}, "chunking must be one of structure, fixed, parent_child"),
    ({"embedding_model_uuid": "m", "chunk_size": True}, "whole number"),
])
def test_bad_creation_settings_explain_themselves(raw, message):
    with pytest.raises(SettingsError, match=message):
        parse_creation_settings(raw)


@pytest.mark.parametrize("raw, message", [
    ({"top_k": -3}, r"top_k \(-3\) must be between 1 and 50"),
    ({"top_k": "five"}, "top_k must be a whole number, got 'five'"),
    ({"search_mode": "fuzzy"}, "search_mode must be one of hybrid, vector, keyword"),
    ({"vector_weight": 1.5}, r"vector_weight \(1.5\) must be between 0.0 and 1.0"),
    ({"score_threshold": "high"}, "score_threshold must be a number"),
    ({"score_threshold": 2}, "higher is better"),
    ({"context_window": 9}, r"context_window \(9\) must be between 0 and 3"),
    ({"score_threshold": float("nan")}, "finite"),
])
def test_bad_retrieval_settings_explain_themselves(raw, message):
    with pytest.raises(SettingsError, match=message):
        parse_retrieval_settings(raw)


def test_retrieval_settings_ignore_unknown_and_null_keys():
    s = parse_retrieval_settings({"top_k": 3, "session_name": "x", "bot_uuid": None, "rerank_model_uuid": None})
    assert s.top_k == 3 and s.rerank_model_uuid == "" and s.search_mode == "hybrid"


def test_component_yaml_declares_the_same_defaults_as_the_settings_type():
    spec = yaml.safe_load(COMPONENT_YAML.read_text(encoding="utf-8"))["spec"]
    creation = {f["name"]: f for f in spec["creation_schema"]}
    retrieval = {f["name"]: f for f in spec["retrieval_schema"]}
    assert creation["embedding_model_uuid"]["type"] == "embedding-model-selector"
    assert creation["embedding_model_uuid"]["required"] is True
    for name, default in CREATION_DEFAULTS.items():
        assert creation[name]["default"] == default, name
    for name, default in RETRIEVAL_DEFAULTS.items():
        assert retrieval[name]["default"] == default, name
    for field in [*spec["creation_schema"], *spec["retrieval_schema"]]:
        for key in ("label", "description"):
            if key in field:
                assert {"en_US", "zh_Hans", "zh_Hant", "ja_JP"} <= set(field[key]), (field["name"], key)


def test_the_readme_explains_every_setting_with_its_default_and_range():
    """README.md → "Settings" has a row for each field of the component's forms, with its default,
    and states the ranges the settings type enforces (the Chinese README: test_readme_parity)."""
    spec = yaml.safe_load(COMPONENT_YAML.read_text(encoding="utf-8"))["spec"]
    readme = (COMPONENT_YAML.parents[2] / "README.md").read_text(encoding="utf-8")
    rows = {m.group(1): (m.group(2).strip(), m.group(3)) for m in
            re.finditer(r"^\| `(\w+)` \|([^|]*)\|(.*)\|$", readme.split("## Settings", 1)[1].split("\n## ", 1)[0], re.M)}
    fields = [*spec["creation_schema"], *spec["retrieval_schema"]]
    assert sorted(rows) == sorted(f["name"] for f in fields)
    for field in fields:
        default, meaning = rows[field["name"]]
        if field.get("required"):
            assert "required" in default, field["name"]
        elif field["default"] in ("", None):
            assert default.startswith(("—", "none")), (field["name"], default)
        elif field["default"] is True:
            assert default == "on", field["name"]
        else:
            value = field["default"]
            assert default.startswith(f"`{value:g}`" if isinstance(value, float) else f"`{value}`"), (field["name"], default)
    for name, low, high in (("chunk_size", MIN_CHUNK_SIZE, MAX_CHUNK_SIZE), ("top_k", 1, MAX_TOP_K),
                            ("context_window", 0, MAX_CONTEXT_WINDOW),
                            ("query_log_size", MIN_QUERY_LOG_SIZE, MAX_QUERY_LOG_SIZE)):
        assert f"{low:,}–{high:,}" in rows[name][1], name


@pytest.mark.parametrize("value, expected", [(True, True), (False, False), ("false", False), ("on", True), (0, False)])
def test_the_source_line_setting_reads_what_the_ui_may_send(value, expected):
    assert parse_retrieval_settings({"source_line": value}).source_line is expected
    assert parse_retrieval_settings({}).source_line is True  # on unless turned off


def test_a_source_line_setting_that_is_not_a_yes_or_no_is_refused():
    with pytest.raises(SettingsError, match="source_line"):
        parse_retrieval_settings({"source_line": "sometimes"})
