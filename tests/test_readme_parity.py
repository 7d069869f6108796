"""readme/README_zh_Hans.md says what README.md says, section for section: the same headings, the
same table rows (settings, limits, troubleshooting), the same setting and constant names, and the
same numbers. A row or a limit added to one README only fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EN = ROOT / "README.md"
ZH = ROOT / "readme" / "README_zh_Hans.md"
# "10 million" and "1,000 万" are one number; so are "10k" and "1 万"
SCALES = {"万": 10**4, "亿": 10**8, "million": 10**6, "billion": 10**9, "megapixels": 10**6,
          "MP": 10**6, "k": 10**3, "M": 10**6}
_SCALED = re.compile(r"(\d[\d,]*(?:\.\d+)?)\s*(万|亿|million\b|billion\b|megapixels\b|MP\b)|(\d+(?:\.\d+)?)(k|M)\b")


def sections(path: Path) -> list[str]:
    """The README cut at its `## ` headings (the text above the first one comes first)."""
    return re.split(r"^## ", path.read_text(encoding="utf-8"), flags=re.M)


def headings(section: str) -> list[str]:
    return re.findall(r"^(#+) ", section, flags=re.M)


def table_rows(section: str) -> int:
    return len(re.findall(r"^\|", section, flags=re.M))


def names(section: str) -> set[str]:
    """snake_case and UPPER_CASE names in code spans: settings, limits' constants, variables."""
    prose = re.sub(r"^```.*?^```", "", section, flags=re.S | re.M)
    found: set[str] = set()
    for span in re.findall(r"`([^`]+)`", prose):
        found |= set(re.findall(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b", span))
    return found


def numbers(section: str) -> set[str]:
    """Every number of two or more digits, scaled words applied ("1.5 s per page" and "1 hour" /
    "1 小时" are left out: single digits are worded differently in the two languages)."""
    def scaled(m: re.Match[str]) -> str:
        value, unit = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        return str(round(float(value.replace(",", "")) * SCALES[unit]))
    text = _SCALED.sub(scaled, section)
    return {n for n in (raw.replace(",", "") for raw in re.findall(r"\d[\d,]*(?:\.\d+)*", text)) if len(n) >= 2}


def pairs() -> list[tuple[str, str, str]]:
    en, zh = sections(EN), sections(ZH)
    assert len(en) == len(zh), f"README.md has {len(en) - 1} `## ` sections, README_zh_Hans.md {len(zh) - 1}"
    return [(e.splitlines()[0] if e.strip() else "(top)", e, z) for e, z in zip(en, zh)]


PAIRS = pairs()


@pytest.mark.parametrize("title, en, zh", PAIRS, ids=[title for title, _, _ in PAIRS])
def test_the_chinese_readme_has_every_heading_row_name_and_number_of_the_english_one(title, en, zh):
    assert headings(en) == headings(zh), f"{title}: headings differ"
    assert table_rows(en) == table_rows(zh), f"{title}: {table_rows(en)} table rows in English, {table_rows(zh)} in Chinese"
    assert names(en) == names(zh), f"{title}: only in English {sorted(names(en) - names(zh))}, only in Chinese {sorted(names(zh) - names(en))}"
    assert numbers(en) == numbers(zh), f"{title}: only in English {sorted(numbers(en) - numbers(zh))}, only in Chinese {sorted(numbers(zh) - numbers(en))}"
