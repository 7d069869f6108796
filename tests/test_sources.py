"""The source line a passage's content starts with (lucidrag/retrieval/sources.py)."""

from __future__ import annotations

import pytest

from lucidrag.retrieval.sources import language_of, split_source_line, with_source_line


def test_the_source_line_names_the_document_its_heading_path_and_page_once():
    assert with_source_line("Install\nRun setup.exe.", "Field report", "Install", 3) == \
        "Source: Field report › Install · p. 3\n\nRun setup.exe."
    # a heading path that starts with the document's name does not repeat it
    assert with_source_line("Field report › Install\nRun setup.exe.", "Field report", "Field report › Install", None) == \
        "Source: Field report › Install\n\nRun setup.exe."
    assert with_source_line("Run setup.exe.", "Field report", "", 3) == "Source: Field report · p. 3\n\nRun setup.exe."


def test_content_that_does_not_start_with_the_heading_path_is_kept_whole():
    # e.g. a neighbour window that starts in the section before the hit's
    assert with_source_line("Intro\nWelcome.\nInstall\nRun it.", "Field report", "Install", None) == \
        "Source: Field report\n\nIntro\nWelcome.\nInstall\nRun it."


def test_the_source_line_and_the_passage_come_apart_again():
    told = with_source_line("Install\nRun setup.exe.\n\nThen reboot.", "Field report", "Install", 3)
    assert split_source_line(told) == ("Field report › Install · p. 3", "Run setup.exe.\n\nThen reboot.")
    assert split_source_line(with_source_line("铁观音产自福建。", "茶叶手册", "", None)) == ("茶叶手册", "铁观音产自福建。")
    assert split_source_line("Install\nRun setup.exe.") is None


def test_nothing_to_say_adds_no_line():
    assert with_source_line("Run setup.exe.", "", "", None) == "Run setup.exe."


@pytest.mark.parametrize("text, language", [
    ("Replace the seal of pump P-7 every 4000 hours.", "en"),
    ("铁观音产自福建安溪，这种茶属于乌龙茶。", "zh_Hans"),
    ("鐵觀音產自福建安溪，這種茶屬於烏龍茶。", "zh_Hant"),
    ("鉄観音は福建省安渓県で作られるお茶です。", "ja"),
    ("型号 PX-1005 的重量是 12 kg，请按说明书安装。", "zh_Hans"),  # a few Latin letters in Chinese text
    ("The Tieguanyin (铁观音) cultivar comes from Anxi in Fujian province, China.", "en"),
])
def test_the_label_is_in_the_passages_language(text: str, language: str):
    assert language_of(text) == language
    label = {"en": "Source: ", "zh_Hans": "来源：", "zh_Hant": "來源：", "ja": "出典："}[language]
    assert with_source_line(text, "Doc", "", 2).startswith(label)
