"""A font with Chinese glyphs on this machine, for the tests that render pages of text (OCR, the
console's untitled picture, the real-host journey's scan) and for .ci/run's check: fontconfig's
list (`fc-list :lang=zh file`) first, else the places Debian's packages put one. Standard library
only, so `python3 tests/cjk_font.py` answers before any virtualenv exists (exit 0 and the path, or
exit 1 and what to install).

LUCIDRAG_CJK_FONT=/path/to/font.ttc picks a font; LUCIDRAG_CJK_FONT=none runs as if there were
none (the tests that need one are then skipped with NO_CJK_FONT)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

ENV = "LUCIDRAG_CJK_FONT"
NO_CJK_FONT = ("no CJK font: apt-get install fonts-wqy-microhei (or fonts-noto-cjk, fonts-wqy-zenhei); "
               ".ci/run installs it")
FONT_DIRS = (Path("/usr/share/fonts"), Path("/usr/local/share/fonts"), Path.home() / ".local/share/fonts")
# Where Debian's packages put them, best first: the tests' pages were laid out with Micro Hei.
KNOWN_FONTS = (
    "truetype/wqy/wqy-microhei.ttc",  # fonts-wqy-microhei
    "truetype/wqy/wqy-zenhei.ttc",  # fonts-wqy-zenhei
    "opentype/noto/NotoSansCJK-Regular.ttc",  # fonts-noto-cjk
    "opentype/noto/NotoSerifCJK-Regular.ttc",  # fonts-noto-cjk
    "wqy-microhei/wqy-microhei.ttc",  # other distributions' layout
)
LOADABLE = (".ttc", ".ttf", ".otf")  # Pillow opens these; bitmap fonts (.pcf) it does not


def cjk_font() -> Path | None:
    """The font to render Chinese with, or None (LUCIDRAG_CJK_FONT decides first)."""
    chosen = os.environ.get(ENV)
    if chosen is not None:
        path = Path(chosen)
        return path if chosen.lower() != "none" and path.is_file() else None
    return _installed()


@lru_cache(maxsize=1)
def _installed() -> Path | None:
    return pick(fontconfig_files(), FONT_DIRS)


def pick(listed: list[Path], font_dirs: tuple[Path, ...]) -> Path | None:
    """The best of the fonts fontconfig `listed` (the known ones by rank, then any loadable one),
    else the first known font under `font_dirs`."""
    usable = [p for p in listed if p.suffix.lower() in LOADABLE and p.is_file()]
    rank: dict[str, int] = {}
    for known in KNOWN_FONTS:
        rank.setdefault(Path(known).name, len(rank))
    usable.sort(key=lambda p: (rank.get(p.name, len(rank)), str(p)))
    if usable:
        return usable[0]
    return next((d / known for known in KNOWN_FONTS for d in font_dirs if (d / known).is_file()), None)


@lru_cache(maxsize=8)
def chinese_face(path: Path) -> int:
    """The face of a font collection (.ttc) that draws Chinese the Simplified Chinese way: Noto
    CJK's first face is its Japanese one, whose forms OCR misreads (门 as 内); else the first."""
    from PIL import ImageFont

    if path.suffix.lower() != ".ttc":
        return 0
    for index in range(32):
        try:
            family = ImageFont.truetype(str(path), 12, index=index).getname()[0] or ""
        except OSError:  # no face at this index: past the last one
            break
        if family.endswith(" SC"):
            return index
    return 0


def fontconfig_files() -> list[Path]:
    """The files `fc-list :lang=zh file` names (fonts that cover Chinese); [] without fontconfig."""
    fc_list = shutil.which("fc-list")
    if fc_list is None:
        return []
    try:
        listing = subprocess.run([fc_list, ":lang=zh", "file"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_fc_list(listing.stdout)


def parse_fc_list(output: str) -> list[Path]:
    """fc-list's `file` lines ("/usr/share/fonts/x.ttc: ") as paths."""
    return [Path(line.rstrip().removesuffix(":")) for line in output.splitlines() if line.strip()]


if __name__ == "__main__":
    found = cjk_font()
    print(found if found else NO_CJK_FONT)
    sys.exit(0 if found else 1)
