"""The plugin-log line README → Troubleshooting tells an operator to look for when plugin storage
fails is the one the plugin writes: the failure is made to happen on the fake host."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from tests.conftest import FakePlugin, Harness

ROOT = Path(__file__).resolve().parent.parent
KB = "kb-troubleshooting"


def quoted_log_lines(readme: Path, row: str) -> list[str]:
    """The log line quoted by each Troubleshooting row that matches `row` (a regex with one group)."""
    section = re.split(r"^## ", readme.read_text(encoding="utf-8"), flags=re.M)[-2]  # Troubleshooting
    return re.findall(row, section, flags=re.M)


async def test_failing_plugin_storage_writes_the_log_line_both_readmes_quote(caplog: pytest.LogCaptureFixture):
    [english] = quoted_log_lines(ROOT / "README.md", r'^\| "([^"]+)" in the plugin log \|')
    [chinese] = quoted_log_lines(ROOT / "readme/README_zh_Hans.md", r"^\| 插件日志中出现 “([^”]+)” \|")
    assert chinese == english
    host = FakePlugin()
    harness = Harness(host)
    await harness.ingest(KB, "first.txt", b"A first file, so that plugin storage names files.")
    host.fail("set_plugin_storage", when=lambda key, **_: "/file/" in key)  # records are not taken
    with caplog.at_level(logging.WARNING):
        await harness.ingest(KB, "manual.md", b"# Pump manual\n\nReplace the intake filter every 90 days.\n")
    assert english.rstrip(" …") in caplog.text
