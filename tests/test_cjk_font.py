"""The CJK font the rendering tests use is found wherever Debian's font packages put it (through
fontconfig, else by path), and without one every test that renders text is skipped with the
reason instead of failing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import cjk_font
from tests.cjk_font import NO_CJK_FONT, parse_fc_list, pick

ROOT = Path(__file__).resolve().parent.parent
DEBIAN_FONTS = {  # package: where it puts its font, under /usr/share/fonts
    "fonts-noto-cjk": "opentype/noto/NotoSansCJK-Regular.ttc",
    "fonts-wqy-zenhei": "truetype/wqy/wqy-zenhei.ttc",
    "fonts-wqy-microhei": "truetype/wqy/wqy-microhei.ttc",
}


def installed(root: Path, *relative: str) -> list[Path]:
    paths = [root / r for r in relative]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"font")
    return paths


@pytest.mark.parametrize("package", sorted(DEBIAN_FONTS))
def test_a_font_is_found_where_each_debian_package_puts_it_without_fontconfig(tmp_path: Path, package: str):
    [path] = installed(tmp_path, DEBIAN_FONTS[package])
    assert pick([], (tmp_path / "elsewhere", tmp_path)) == path


@pytest.mark.parametrize("package", sorted(DEBIAN_FONTS))
def test_a_font_fontconfig_lists_is_used(tmp_path: Path, package: str):
    [path] = installed(tmp_path / "fonts", DEBIAN_FONTS[package])
    assert pick([path], ()) == path


def test_of_the_fonts_fontconfig_lists_micro_hei_comes_first_and_bitmap_fonts_never(tmp_path: Path):
    other, bitmap, noto, zenhei, microhei = installed(
        tmp_path, "truetype/arphic/uming.ttc", "misc/wenquanyi_12pt.pcf", *DEBIAN_FONTS.values())
    assert pick([other, bitmap, noto, zenhei, microhei], ()) == microhei  # the tests' pages were laid out with it
    assert pick([bitmap, noto, zenhei], ()) == zenhei
    assert pick([bitmap, other], ()) == other  # any font that covers Chinese does
    assert pick([bitmap], ()) is None
    assert pick([tmp_path / "removed.ttc"], ()) is None  # listed by a stale cache, gone


def test_fontconfigs_file_list_is_read_as_paths():
    listing = ("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc: \n"
               "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc: \n\n")
    assert parse_fc_list(listing) == [Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"),
                                      Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc")]


def test_no_font_anywhere_is_none(tmp_path: Path):
    assert pick([], (tmp_path,)) is None


def test_the_environment_picks_a_font_or_hides_them_all(tmp_path: Path, monkeypatch):
    [path] = installed(tmp_path, "mine.otf")
    monkeypatch.setenv(cjk_font.ENV, str(path))
    assert cjk_font.cjk_font() == path
    monkeypatch.setenv(cjk_font.ENV, "none")
    assert cjk_font.cjk_font() is None
    result = subprocess.run([sys.executable, str(ROOT / "tests" / "cjk_font.py")], capture_output=True, text=True,
                            env=dict(os.environ))
    assert (result.returncode, result.stdout.strip()) == (1, NO_CJK_FONT)  # .ci/run then installs one


def test_without_a_font_the_tests_that_render_text_are_skipped_with_the_reason():
    tests = ["tests/test_console.py::test_an_untitled_picture_is_named_by_type_and_time_to_the_second",
             "tests/test_ocr.py", "tests/e2e/test_real_host.py::test_real_langbot_host_user_journey"]
    env = dict(os.environ, LUCIDRAG_CJK_FONT="none")
    env.pop("LUCIDRAG_SKIP_E2E", None)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *tests],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    summary = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 0 and "failed" not in summary and "passed" not in summary, result.stdout[-3000:]
    skips = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert any("test_console.py" in line and NO_CJK_FONT in line for line in skips), skips
    assert any("test_ocr.py" in line and NO_CJK_FONT in line for line in skips), skips
    assert any("test_real_host.py" in line and NO_CJK_FONT in line for line in skips), skips


def test_a_font_collection_is_drawn_with_its_simplified_chinese_face():
    from PIL import ImageFont

    collections = [p for p in cjk_font.fontconfig_files() if p.suffix.lower() == ".ttc" and p.is_file()]
    if not collections:
        pytest.skip("fontconfig lists no CJK font collection (.ttc) on this machine")
    for path in collections:
        families = []
        for index in range(32):
            try:
                families.append(ImageFont.truetype(str(path), 12, index=index).getname()[0])
            except OSError:
                break
        chosen = families[cjk_font.chinese_face(path)]
        assert chosen.endswith(" SC") or not any(f.endswith(" SC") for f in families), (path, chosen, families)
