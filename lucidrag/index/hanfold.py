"""Traditional → Simplified Chinese character folding for index terms.

``FOLD`` is a ``str.translate`` table mapping each Traditional character (and its Taiwan / Hong
Kong variant forms) to its Simplified form, so that a question in one script meets text in the
other: both sides are folded before they become terms. Built once at import from OpenCC's
character dictionaries as the ``opencc-python-reimplemented`` wheel ships them (Apache-2.0;
``TSCharacters``, ``TWVariantsRev``, ``HKVariantsRev``): character by character, first candidate,
no phrase rules. That is enough for matching (a term is the same whichever script it was written
in) and is not a converter: the many-to-one merges (髮/發 → 发, 乾/幹 → 干) only join terms.
Japanese kanji fold as well, consistently on both sides. About 4,100 entries.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

__all__ = ["FOLD"]

# the wheel's data files, read without importing the package (its converter is not used)
_spec = find_spec("opencc")
if _spec is None or _spec.origin is None:
    raise ImportError("opencc-python-reimplemented is not installed (requirements.txt)")
_DICTIONARIES = Path(_spec.origin).parent / "dictionary"


def _single_chars(name: str) -> dict[str, str]:
    """The dictionary's one-character entries, each to its first candidate."""
    out: dict[str, str] = {}
    for line in (_DICTIONARIES / name).read_text(encoding="utf-8").splitlines():
        key, _, values = line.partition("\t")
        first = values.split(" ", 1)[0]
        if len(key) == 1 and len(first) == 1:
            out[key] = first
    return out


def _fold_table() -> dict[int, str]:
    variants = _single_chars("TWVariantsRev.txt") | _single_chars("HKVariantsRev.txt")
    to_simplified = _single_chars("TSCharacters.txt")
    table: dict[int, str] = {}
    for char in set(variants) | set(to_simplified):
        folded = char
        for _ in range(3):  # variant → standard Traditional → Simplified; stops when stable
            step = to_simplified.get(variants.get(folded, folded), variants.get(folded, folded))
            if step == folded:
                break
            folded = step
        if folded != char:
            table[ord(char)] = folded
    return table


FOLD: dict[int, str] = _fold_table()
