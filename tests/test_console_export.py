"""The console's export and score labels as an operator sees them inside LangBot's page frame, which
blocks downloads: the text is shown with a Copy button (the clipboard API, else the selected text
and the browser's copy), the page says to copy, and a download is offered only where the frame
allows one. The markup is checked as text; the behaviour in Chromium (tests/console_frame.py)."""

from __future__ import annotations

import re

import pytest

from tests.console_frame import LANGBOT_SANDBOX, console_in_langbot_frame, find_chromium
from tests.conftest import Harness
from tests.test_console import KB, ROOT, ConsoleHost, host, page  # noqa: F401 - fixtures
from tests.test_query_log import SOLAR_Q, kb_with_two_files

HTML = (ROOT / "components/pages/console/console.html").read_text(encoding="utf-8")
BLOCKS = dict(re.findall(r"\n    (en_US|zh_Hans): \{(.*?)\n    \}", HTML, re.S))


def text(lang: str, key: str) -> str:
    return re.search(rf"\b{key}: '([^']*)'", BLOCKS[lang]).group(1)


def function(name: str) -> str:
    return re.search(rf"function {name}\(.*?\n  \}}", HTML, re.S).group(0)


def test_the_export_offers_copy_and_never_a_link_that_only_clicks_itself():
    export = function("exportQuestions")
    assert "copyExport(area, status)" in export and "data-testid': 'copy-export'" in export
    assert "link.click()" not in HTML and ".click()" not in export  # no download started behind the operator's back
    assert "if (downloadsAllowed())" in export and "noDownloadHere" in export
    copy = function("copyExport")
    assert "navigator.clipboard.writeText" in copy and "document.execCommand('copy')" in copy and "area.select()" in copy
    allowed = function("downloadsAllowed")
    assert "allow-downloads" in allowed and "window.origin !== 'null'" in allowed
    for lang, says_copy in (("en_US", "Click Copy"), ("zh_Hans", "点击“复制”")):
        assert says_copy in text(lang, "exportReady")
        assert text(lang, "copied") and "Ctrl+C" in text(lang, "copyFailed") and text(lang, "noDownloadHere")


def test_the_search_scores_say_which_one_orders_the_results():
    for lang, rank, own in (("en_US", "rank score", "own score"), ("zh_Hans", "排序得分", "自身得分")):
        assert text(lang, "score") == rank and text(lang, "fused") == own
        legend = text(lang, "scoresLegend")
        assert rank.capitalize() in legend or rank in legend
        assert own.capitalize() in legend or own in legend
        assert "score_threshold" in legend and text(lang, "scoreHelp") and text(lang, "fusedHelp")
    search = function("search")
    assert "scores-legend" in search and "title: t('scoreHelp')" in search and "title: t('fusedHelp')" in search


def test_the_unanswered_list_is_on_the_page_in_both_languages():
    assert 'data-testid="unanswered-list"' in HTML and "w.could_not_answer" in function("renderUnanswered")
    assert text("en_US", "unansweredTitle") == "What your knowledge base could not answer"
    assert text("zh_Hans", "unansweredTitle") == "知识库无法回答的问题"
    for key in ("unansweredHelp", "unansweredNone", "askedTimes", "sNothingHelp"):
        assert text("en_US", key) and text("zh_Hans", key)
    # a search that finds nothing says what the bot gets for it
    assert "the bot would be told nothing" in text("en_US", "noHits") and "机器人不会收到任何内容" in text("zh_Hans", "noHits")


needs_chromium = pytest.mark.skipif(find_chromium() is None,
                                    reason="no Chromium (Debian: apt-get install chromium; .ci/run installs it)")


async def questions_with_a_gap(harness: Harness, host: ConsoleHost) -> None:
    await kb_with_two_files(harness, host)
    for question in (SOLAR_Q, "zygomorphic xylophones", "zygomorphic xylophones"):
        await harness.retrieve(KB, question, settings={"search_mode": "keyword"})


@needs_chromium
@pytest.mark.parametrize("language", ["en-US", "zh-Hans"])
async def test_in_langbots_frame_the_export_is_copied_and_no_dead_download_link_is_shown(harness: Harness, host,
                                                                                       page, language):
    await questions_with_a_gap(harness, host)
    async with console_in_langbot_frame(page, language) as (_, frame):
        gap = frame.locator('[data-testid="unanswered-question"]')
        await gap.first.wait_for()
        assert await gap.count() == 1 and await gap.first.get_attribute("data-count") == "2"
        await frame.locator('[data-testid="export-unanswered-csv"]').click()
        area = frame.locator('[data-testid="export-text"]')
        await area.wait_for()
        assert (await area.input_value()).splitlines()[1].startswith("zygomorphic xylophones,")
        assert await frame.locator('[data-testid="export-link"]').count() == 0
        assert await frame.locator('[data-testid="no-download"]').is_visible()
        await frame.locator('[data-testid="copy-export"]').click()
        status = frame.locator('[data-testid="copy-status"][data-copied]')
        await status.wait_for()
        copied = await status.get_attribute("data-copied") == "true"
        expected = {"en-US": ("Copied to the clipboard.", "Ctrl+C"), "zh-Hans": ("已复制到剪贴板。", "Ctrl+C")}[language]
        assert (await status.inner_text()) == expected[0] if copied else expected[1] in await status.inner_text()
        # either way the text is selected for the operator (the fallback's selection)
        selected = await area.evaluate("a => a.value.substring(a.selectionStart, a.selectionEnd)")
        assert selected == await area.input_value()


@needs_chromium
async def test_a_frame_that_allows_downloads_also_gets_the_download_link(harness: Harness, host, page):
    await questions_with_a_gap(harness, host)
    async with console_in_langbot_frame(page, sandbox=LANGBOT_SANDBOX + " allow-same-origin allow-downloads") as (_, frame):
        await frame.locator('[data-testid="question-row"]').first.wait_for()
        await frame.locator('[data-testid="export-json"]').click()
        link = frame.locator('[data-testid="export-link"]')
        await link.wait_for()
        assert (await link.get_attribute("download")).startswith("lucidrag-questions-")
        assert await frame.locator('[data-testid="copy-export"]').is_visible()  # never the only path


@needs_chromium
async def test_a_kb_with_more_files_than_the_list_holds_says_how_many_are_not_listed(harness: Harness, host, page,
                                                                                   monkeypatch):
    monkeypatch.setattr("lucidrag.console.MAX_LISTED_FILES", 1)  # a KB of 2 files as one of 501
    await kb_with_two_files(harness, host)
    async with console_in_langbot_frame(page) as (_, frame):
        await frame.locator('[data-testid="file-row"]').first.wait_for()
        assert await frame.locator('[data-testid="file-row"]').count() == 1
        note = frame.locator('[data-testid="files-not-listed"]')
        assert await note.is_visible()
        assert await note.inner_text() == ("Only the first 1 files are listed; 1 more are not (nor found by the "
                                           "filter). They are in the knowledge base and answer questions as usual.")


def test_the_files_not_listed_note_is_on_the_page_in_both_languages():
    assert "{n}" in text("en_US", "filesNotListed") and "{m}" in text("en_US", "filesNotListed")
    assert "{n}" in text("zh_Hans", "filesNotListed") and "{m}" in text("zh_Hans", "filesNotListed")
