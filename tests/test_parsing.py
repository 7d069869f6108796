"""lucidrag.ingestion.parsing: real files made with the real writers → Document / clear ParseError."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from lucidrag.base.errors import ParseError, UnsupportedFormatError
from lucidrag.ingestion.document import Document
from lucidrag.ingestion.parsing import (
    SUPPORTED_EXTENSIONS,
    detect,
    document_from_parse_result,
    parse_file,
)
from lucidrag.ingestion.parsing.pdf import join_lines

try:
    from . import samples
except ImportError:  # tests/ is not a package: pytest put this directory on sys.path
    import samples

KEY = "v1/abc/3f2a9e1"  # the host's storage key: only the extension means anything


def by_heading(document: Document) -> dict[tuple[str, ...], str]:
    out: dict[tuple[str, ...], str] = {}
    for section in document.sections:
        out[section.headings] = (out.get(section.headings, "") + "\n" + section.text).strip()
    return out


def assert_clean(document: Document) -> None:
    assert document.sections
    for section in document.sections:
        assert section.text.strip(), section
        assert "\r" not in section.text
        assert not any(ord(ch) < 32 and ch not in "\n\t" for ch in section.text), section


# ---------------------------------------------------------------------------------------------
# PDF


@pytest.fixture(scope="module")
def outline_pdf() -> bytes:
    return samples.pdf_bytes(
        [
            ["Introduction", "LucidRAG splits the files you upload into passages and stores their",
             "vectors, so that a question finds the passages that answer it. Long para-",
             "graphs wrap across lines in a PDF text layer."],
            ["Installation", "Copy the plugin into the plugins folder and restart."],
            ["Linux", "Use the package manager to install the dependencies."],
        ],
        outline=[("Introduction", 0, 0), ("Installation", 0, 1), ("Linux", 1, 2)],
    )


def test_pdf_pages_outline_and_line_joining(outline_pdf):
    document = parse_file(outline_pdf, KEY + ".pdf", "application/pdf")
    assert document.format == "pdf"
    assert document.metadata["page_count"] == 3
    assert_clean(document)
    pages = {s.page: s for s in document.sections}
    assert set(pages) == {1, 2, 3}
    assert pages[1].headings == ("Introduction",)
    assert pages[2].headings == ("Installation",)
    assert pages[3].headings == ("Installation", "Linux")
    # wrapped Latin lines joined with a space, the hyphenated word re-joined
    assert "stores their vectors, so that" in pages[1].text
    assert "Long paragraphs wrap" in pages[1].text
    assert pages[3].text == "Use the package manager to install the dependencies."


def test_pdf_detected_by_magic_bytes(outline_pdf):
    document = parse_file(outline_pdf, KEY + ".bin", "application/octet-stream")
    assert document.format == "pdf"
    assert parse_file(outline_pdf, "v1/abc/noextension").format == "pdf"


def test_chinese_pdf_lines_joined_without_spaces():
    data = samples.chinese_pdf_bytes()
    if data is None:
        pytest.skip("reportlab has no STSong-Light CID font")
    document = parse_file(data, KEY + ".pdf")
    assert document.sections[0].page == 1
    assert samples.CHINESE in document.text  # wrapped every 30 chars; the breaks are gone


def test_pdf_of_shapes_without_text_fails_after_ocr_found_nothing():
    with pytest.raises(ParseError, match=r"No text found in this PDF, not even by OCR.*scan it again"):
        parse_file(samples.image_only_pdf_bytes(), KEY + ".pdf")


def test_encrypted_pdf():
    with pytest.raises(ParseError, match=r"encrypted/password-protected\. Remove the password"):
        parse_file(samples.encrypted_pdf_bytes(), KEY + ".pdf")


def test_pdf_with_owner_password_only_is_read():
    document = parse_file(samples.owner_only_pdf_bytes(), KEY + ".pdf")
    assert document.text == "Restricted but readable text"


@pytest.mark.parametrize("fraction", [0.4, 0.9])
def test_truncated_pdf(outline_pdf, fraction):
    data = outline_pdf[: int(len(outline_pdf) * fraction)]
    with pytest.raises(ParseError, match=r"This PDF is damaged or truncated \(.+\)\. Re-export it"):
        parse_file(data, KEY + ".pdf")


def test_garbage_named_pdf():
    with pytest.raises(ParseError, match=r"damaged or truncated"):
        parse_file(b"this is not a pdf at all, just words" * 10, KEY + ".pdf")


def test_join_lines_rules():
    text = "\n".join([
        "第一章 总则",
        "知识库把上传的文件切分成小段落，并为每个段落计算向",
        "量。检索时系统先找到与问题最相近的段落。",
        "- a bullet item",
        "- another one",
        "The quick brown fox jumps over the lazy dog and keeps on running far away",
        "into the forest where nobody can find it anymore.",
    ])
    joined = join_lines(text)
    assert "第一章 总则\n知识库" in joined  # a short heading line stays on its own
    assert "计算向量。检索" in joined  # CJK wrap removed without a space
    assert "- a bullet item\n- another one" in joined
    assert "far away into the forest" in joined


# ---------------------------------------------------------------------------------------------
# Office


def test_docx_headings_tables_and_localized_styles():
    document = parse_file(samples.docx_bytes(), KEY + ".docx")
    assert document.format == "docx"
    assert_clean(document)
    sections = by_heading(document)
    assert sections[("Product Guide",)] == "Intro paragraph before any chapter."
    assert "Run the installer" in sections[("Product Guide", "Installation")]
    assert "apt install lucid" in sections[("Product Guide", "Installation", "Linux")]
    assert sections[("Product Guide", "Usage")] == "Ask a question in the chat."
    assert sections[("Product Guide", "常见问题")] == "这里是中文段落。"  # style named "标题 1"
    tables = [s for s in document.sections if s.is_table]
    assert len(tables) == 1
    assert tables[0].headings == ("Product Guide", "Installation", "Linux")
    assert tables[0].text.splitlines() == [
        "| Option | Default |", "| --- | --- |", "| chunk_size | 512 |", "| overlap | 64 |"]


def test_docx_by_mime_and_by_magic():
    data = samples.docx_bytes()
    mime = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    assert parse_file(data, KEY, mime).format == "docx"
    assert parse_file(data, KEY + ".bin").format == "docx"
    assert parse_file(data, KEY + ".doc").format == "docx"  # a .docx saved under a .doc name


def test_docm_and_template_content_types():
    main = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
    docm = samples.with_content_type(samples.docx_bytes(), main,
                                     "application/vnd.ms-word.document.macroEnabled.main+xml")
    assert "Run the installer" in parse_file(docm, KEY + ".docm").text
    pres = "application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"
    ppsx = samples.with_content_type(samples.pptx_bytes(), pres,
                                     "application/vnd.openxmlformats-officedocument.presentationml.slideshow.main+xml")
    assert "Revenue grew" in parse_file(ppsx, KEY + ".ppsx").text


def test_damaged_docx():
    data = samples.docx_bytes()
    with pytest.raises(ParseError, match=r"Word document is damaged.*save it as \.docx again"):
        parse_file(data[: len(data) // 2], KEY + ".docx")
    with pytest.raises(ParseError, match=r"Word document is damaged"):
        parse_file(samples.zip_bytes({"a.txt": b"hello"}), KEY + ".docx")


def test_damaged_pptx():
    data = samples.pptx_bytes()
    with pytest.raises(ParseError, match=r"PowerPoint file is damaged.*\(not a valid \.pptx package\).*save it as \.pptx again"):
        parse_file(data[: len(data) // 2], KEY + ".pptx")
    with pytest.raises(ParseError, match=r"PowerPoint file is damaged.*\(missing part "):
        parse_file(samples.zip_bytes({"a.txt": b"hello"}), KEY + ".pptx")


def test_pptx_slides_tables_notes():
    document = parse_file(samples.pptx_bytes(), KEY + ".pptx")
    assert document.format == "pptx"
    assert_clean(document)
    first, table = document.sections
    assert first.page == 1 and first.headings == ("Quarterly Results",)
    assert "Revenue grew 12 percent" in first.text
    assert "Grouped remark" in first.text  # text inside a group shape
    assert first.text.endswith("Notes: Mention the new region.")
    assert table.page == 2 and table.headings == ("Regional Table",) and table.is_table
    assert table.text.splitlines()[0] == "| Region | Sales |"
    assert "| South | 80 |" in table.text


def test_xlsx_sheets_as_markdown_tables():
    document = parse_file(samples.xlsx_bytes(), KEY + ".xlsx")
    assert document.format == "xlsx"
    assert_clean(document)
    staff, notes = document.sections  # the empty sheet produces nothing
    assert staff.headings == ("Staff",) and staff.page is None and staff.is_table  # a sheet is no page
    assert staff.text.splitlines() == [
        "| Name | Age | Joined | Score |",
        "| --- | --- | --- | --- |",
        "| Alice | 30 | 2021-03-04 | 9.5 |",
        "| Bob | 41 | 2020-01-02 | 7.25 |",  # 41.0 → 41, midnight datetime → date, empty row skipped
    ]
    assert notes.headings == ("Notes",) and notes.page is None
    assert "| pipe\\|char | line break |" in notes.text


def test_legacy_office_files():
    with pytest.raises(UnsupportedFormatError, match=r"Legacy Word \.doc files are not supported\. "
                                                     r"Open it in Word/WPS/LibreOffice and save as \.docx"):
        parse_file(samples.ole_bytes("WordDocument"), KEY + ".doc")
    with pytest.raises(UnsupportedFormatError, match=r"Legacy PowerPoint \.ppt.*save as \.pptx"):
        parse_file(samples.ole_bytes("PowerPoint Document"), KEY + ".ppt")
    # by magic bytes alone
    with pytest.raises(UnsupportedFormatError, match=r"Legacy Word"):
        parse_file(samples.ole_bytes("WordDocument"), KEY + ".bin")
    with pytest.raises(UnsupportedFormatError, match=r"password-protected"):
        parse_file(samples.ole_bytes("EncryptedPackage"), KEY + ".docx")


def test_damaged_picture_says_save_it_again():
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
    with pytest.raises(ParseError, match=r"\.png picture is damaged.*Save it again as PNG or JPEG"):
        parse_file(png, KEY + ".png")
    with pytest.raises(ParseError, match=r"picture is damaged"):
        parse_file(png, KEY + ".bin")


# ---------------------------------------------------------------------------------------------
# Text and encodings

CHINESE_TEXT = "第一段：知识库检索测试。\n\n第二段：这是一个繁體與简体混合的句子，用来检查编码。"


@pytest.mark.parametrize("encoding", ["gbk", "gb18030", "utf-16", "utf-8-sig", "utf-8"])
def test_chinese_text_encodings(encoding):
    document = parse_file(CHINESE_TEXT.encode(encoding), KEY + ".txt")
    assert document.format == "text"
    assert document.text == CHINESE_TEXT


def test_big5_text():
    text = "這是一份繁體中文的說明文件。我們用它來檢查編碼偵測是否正確，包括標點符號與數字123。"
    assert parse_file(text.encode("big5"), KEY + ".txt").text == text


@pytest.mark.parametrize("text,encoding", [
    ("繁體中文", "big5"),  # too short for chardet to be sure: the common-character check decides
    ("會議記錄：明天上午十點開會。", "big5"),
    ("会议纪要：明天上午十点开会。", "gbk"),
    ("你好", "gbk"),
    ("Café naïve résumé — déjà vu, façade.", "cp1252"),
    ("Grüße aus München, schöne Straße", "latin-1"),
    ("日本語のテキストです。これはテストです。", "shift_jis"),
])
def test_short_texts_in_legacy_encodings(text, encoding):
    assert parse_file(text.encode(encoding), KEY + ".txt").text == text


def test_utf8_cut_inside_last_character_or_with_a_stray_bad_byte():
    text = "中文内容，" * 400
    data = text.encode()
    assert parse_file(data[:-1], KEY + ".txt").text == text[:-1]
    damaged = data[:3000] + b"\xff" + data[3000:]
    assert parse_file(damaged, KEY + ".txt").text.replace("\ufffd", "") == text


def test_gb18030_only_characters():
    text = "生僻字：𠀀𪚥，以及欧元符号€和常用汉字。" * 3
    assert parse_file(text.encode("gb18030"), KEY + ".txt").text == text


def test_text_newlines_and_control_characters_cleaned():
    document = parse_file(b"Line one\r\nLine two\rLine three\x07\x00\n\n\n\nEnd\x0c", KEY + ".log")
    assert document.text == "Line one\nLine two\nLine three\n\nEnd"


def test_binary_named_txt():
    garbage = bytes(range(256)) * 40
    with pytest.raises(ParseError, match=r"This \.txt file is not text \(it looks binary\)"):
        parse_file(garbage, KEY + ".txt")


def test_empty_and_whitespace():
    with pytest.raises(ParseError, match=r"^The file is empty \(0 bytes\)\.$"):
        parse_file(b"", KEY + ".txt")
    with pytest.raises(ParseError, match=r"^The file contains only whitespace"):
        parse_file(b" \r\n\t \n\xe3\x80\x80", KEY + ".txt")  # includes an ideographic space
    with pytest.raises(ParseError, match=r"only whitespace"):
        parse_file(b"\n\n", KEY + ".md")


def test_unsupported_extension_lists_supported_types():
    with pytest.raises(UnsupportedFormatError, match=r"^Unsupported file type \.xyz\. Supported: \.pdf, \.docx"):
        parse_file(bytes(range(256)) * 4, KEY + ".xyz")


def readme_extensions() -> list[str]:
    """The extensions README.md's "Supported formats" table gives in its extensions column."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Supported formats", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in table.splitlines() if line.startswith("| ")]
    return [ext for row in rows for ext in re.findall(r"`(\.[a-z0-9]+)`", row[2])]


def test_every_extension_the_readme_names_is_read_and_named_when_a_type_is_refused():
    extensions = readme_extensions()
    assert ".docm" in extensions and ".tiff" in extensions  # the table was found
    with pytest.raises(UnsupportedFormatError) as refused:
        parse_file(bytes(range(256)) * 4, KEY + ".xyz")
    named = re.findall(r"\.[a-z0-9]+", str(refused.value).split("Supported: ", 1)[1])
    assert [ext for ext in extensions if ext not in named] == []
    assert [ext for ext in extensions if ext not in SUPPORTED_EXTENSIONS] == []
    assert [ext for ext in extensions if detect(b"", KEY + ext)[0] in ("unknown", "legacy_doc", "legacy_ppt")] == []


def test_unknown_extension_with_text_content_is_text():
    assert parse_file(b"Title\n=====\n\nSome restructured text.", KEY + ".rst").format == "text"
    assert parse_file("配置项 = 值".encode("gbk"), KEY + ".weird").text == "配置项 = 值"


# ---------------------------------------------------------------------------------------------
# Markup, data


def test_html_drops_boilerplate_and_splits_at_headings():
    html = """<!DOCTYPE html><html><head><meta charset="gbk"><title>帮助中心</title>
    <style>body{color:red}</style><script>var secret = 1;</script></head>
    <body><header>Site header</header><nav><a href="/">Home</a></nav>
    <h1>使用指南</h1><p>欢迎使用 <b>LucidRAG</b>。</p>
    <h2>安装</h2><p>运行安装程序。</p>
    <table><tr><th>参数</th><th>默认值</th></tr><tr><td>chunk_size</td><td>512</td></tr></table>
    <form><input name=q></form><footer>版权所有 footer</footer><noscript>enable js</noscript></body></html>"""
    document = parse_file(html.encode("gbk"), KEY + ".html")
    assert document.format == "html"
    assert document.metadata["title"] == "帮助中心"
    assert_clean(document)
    text = document.text
    for junk in ("secret", "color:red", "Site header", "Home", "footer", "enable js"):
        assert junk not in text
    sections = by_heading(document)
    assert "欢迎使用 **LucidRAG**。" in sections[("使用指南",)]
    assert "运行安装程序。" in sections[("使用指南", "安装")]
    table = next(s for s in document.sections if s.is_table)
    assert table.headings == ("使用指南", "安装")
    assert table.text.splitlines()[0] == "| 参数 | 默认值 |"


def test_html_wrong_meta_charset_falls_back():
    html = '<html><head><meta charset="utf-8"></head><body><p>中文内容在这里。</p></body></html>'
    assert "中文内容在这里。" in parse_file(html.encode("gbk"), KEY + ".htm").text


def test_markdown_atx_and_setext_headings():
    md = (
        "---\ntitle: front matter\n---\n"
        "Guide\n=====\n\nIntro text.\n\n"
        "## Install\n\nRun `pip install`.\n\n```\n# not a heading\n```\n\n"
        "Linux\n-----\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "# Other\n\nLast words.\n"
    )
    document = parse_file(md.encode(), KEY + ".md")
    assert document.format == "markdown"
    sections = by_heading(document)
    assert sections[("Guide",)] == "Intro text."
    assert "# not a heading" in sections[("Guide", "Install")]
    assert "```" in sections[("Guide", "Install")]  # the source is kept as written
    linux = [s for s in document.sections if s.headings == ("Guide", "Linux")]
    assert linux[0].is_table and linux[0].text.startswith("| a | b |")
    assert sections[("Other",)] == "Last words."
    assert "front matter" not in document.text


def test_json_flattened_per_top_level_key():
    data = {"server": {"host": "localhost", "ports": [80, 443]}, "debug": False, "name": "演示"}
    document = parse_file(json.dumps(data, ensure_ascii=False).encode(), KEY + ".json")
    sections = by_heading(document)
    assert sections[("server",)] == "server.host: localhost\nserver.ports: 80, 443"
    assert sections[("debug",)] == "debug: false"
    assert sections[("name",)] == "name: 演示"


def test_json_top_level_array_and_jsonl():
    document = parse_file(b'[{"q": "a?", "a": "yes"}, {"q": "b?"}]', KEY + ".json")
    assert [s.headings for s in document.sections] == [("[0]",), ("[1]",)]
    assert document.sections[0].text == "[0].q: a?\n[0].a: yes"
    lines = parse_file(b'{"id": 1, "t": "x"}\n\n{"id": 2, "t": "y"}\n', KEY + ".jsonl")
    assert lines.format == "jsonl"
    assert [s.text for s in lines.sections] == ["id: 1\nt: x", "id: 2\nt: y"]


def test_invalid_json_mentions_line_and_column():
    with pytest.raises(ParseError, match=r"not valid JSON: Expecting value at line 4, column 1\. Fix it"):
        parse_file(b'{\n  "a": 1,\n  "b": \n}', KEY + ".json")
    with pytest.raises(ParseError, match=r"at line 2, column"):
        parse_file(b'{"a": 1}\n{"a": \n', KEY + ".jsonl")


def test_csv_gbk_semicolon_and_tsv():
    csv_text = "姓名;城市;金额\r\n张三;北京;12.5\r\n李四;\"上海;浦东\";8\r\n"
    document = parse_file(csv_text.encode("gbk"), KEY + ".csv")
    assert document.format == "csv"
    (section,) = document.sections
    assert section.is_table
    assert section.text.splitlines() == [
        "| 姓名 | 城市 | 金额 |", "| --- | --- | --- |", "| 张三 | 北京 | 12.5 |", "| 李四 | 上海;浦东 | 8 |"]
    tsv = parse_file(b"a\tb\n1\t2\n", KEY + ".tsv")
    assert tsv.format == "tsv" and tsv.sections[0].text.endswith("| 1 | 2 |")


# ---------------------------------------------------------------------------------------------
# ZIP


def test_zip_members_parsed_and_bad_member_skipped(caplog):
    archive = samples.zip_bytes({
        "docs/guide.docx": samples.docx_bytes(),
        "readme.txt": "说明文件内容".encode("gbk"),
        "broken.pdf": b"%PDF-1.4 garbage that is cut off",
        "__MACOSX/._guide.docx": b"junk",
        ".DS_Store": b"junk",
        "empty/": b"",
    })
    with caplog.at_level(logging.WARNING, logger="lucidrag.ingestion.parsing.archive"):
        document = parse_file(archive, KEY + ".zip")
    assert document.format == "zip"
    assert document.metadata["members"] == 3
    assert document.metadata["members_skipped"] == 1
    assert "broken.pdf" in str(document.metadata["skipped"])
    heads = {s.headings[0] for s in document.sections}
    assert heads == {"docs/guide.docx", "readme.txt"}
    assert any(s.headings == ("docs/guide.docx", "Product Guide", "Installation") for s in document.sections)
    assert next(s for s in document.sections if s.headings == ("readme.txt",)).text == "说明文件内容"
    assert "garbage" not in caplog.text  # contents are never logged
    assert "skipped" in caplog.text


def test_zip_all_members_fail_lists_reasons():
    archive = samples.zip_bytes({"old.doc": samples.ole_bytes("WordDocument"), "blank.txt": b"   "})
    with pytest.raises(ParseError, match=r"None of the 2 files in this \.zip could be read — "
                                         r"old\.doc: Legacy Word .*; blank\.txt: The file contains only whitespace"):
        parse_file(archive, KEY + ".zip")


def test_zip_nesting_depth_and_limits(monkeypatch):
    inner = samples.zip_bytes({"inner.txt": b"inner text"})
    innermost = samples.zip_bytes({"deep.zip": samples.zip_bytes({"x.txt": b"too deep"}), "ok.txt": b"ok"})
    document = parse_file(samples.zip_bytes({"a.zip": inner, "b.zip": innermost}), KEY + ".zip")
    assert by_heading(document) == {("a.zip", "inner.txt"): "inner text", ("b.zip", "ok.txt"): "ok"}

    from lucidrag.ingestion.parsing import archive as archive_module

    monkeypatch.setattr(archive_module, "MAX_MEMBERS", 2)
    with pytest.raises(ParseError, match=r"has 3 files; at most 2 are accepted"):
        parse_file(samples.zip_bytes({f"{i}.txt": b"x" for i in range(3)}), KEY + ".zip")
    monkeypatch.setattr(archive_module, "MAX_MEMBERS", 500)
    monkeypatch.setattr(archive_module, "MAX_TOTAL_BYTES", 1000)
    with pytest.raises(ParseError, match=r"unpacks to .* at most 0 MB"):
        parse_file(samples.zip_bytes({"big.txt": b"a" * 5000}), KEY + ".zip")


def test_damaged_zip():
    archive = samples.zip_bytes({"a.txt": b"hello " * 1000})
    with pytest.raises(ParseError, match=r"\.zip archive is damaged or truncated"):
        parse_file(archive[: len(archive) // 2], KEY + ".zip")


# ---------------------------------------------------------------------------------------------
# API odds and ends


def test_unexpected_library_error_becomes_parse_error(monkeypatch):
    from lucidrag.ingestion.parsing import registry

    def explode(data, ext):
        raise KeyError("boom")

    monkeypatch.setattr(registry, "_parsers", lambda: {"text": explode})
    with pytest.raises(ParseError, match=r"Could not read this \.txt file \(KeyError\); it may be damaged"):
        parse_file(b"hello", KEY + ".txt")


def test_supported_extensions_and_detect():
    for ext in (".pdf", ".docx", ".pptx", ".xlsx", ".xls", ".ods", ".csv", ".html", ".md", ".json",
                ".jsonl", ".txt", ".zip"):
        assert ext in SUPPORTED_EXTENSIONS
    assert ".doc" not in SUPPORTED_EXTENSIONS
    assert detect(b"hello", "v1/a/B.TXT") == ("text", ".txt")
    assert detect(b"{}", "v1/a/noext", "application/json; charset=utf-8") == ("json", ".json")


def test_document_from_parse_result_builds_heading_paths():
    document = document_from_parse_result(
        "ignored when sections have text",
        [
            ("Preface text", None, 0, 1),
            ("Chapter body\r\n", "Chapter 1", 1, 2),
            ("Section body", "1.1 Scope", 2, 2),
            ("", "1.2 Empty", 2, 3),
            ("Sub of empty", "1.2.1 Deep", 3, 3),
            ("Next chapter", "Chapter 2", 1, None),
        ],
    )
    assert [(s.text, s.headings, s.page) for s in document.sections] == [
        ("Preface text", (), 1),
        ("Chapter body", ("Chapter 1",), 2),
        ("Section body", ("Chapter 1", "1.1 Scope"), 2),
        ("Sub of empty", ("Chapter 1", "1.2 Empty", "1.2.1 Deep"), 3),
        ("Next chapter", ("Chapter 2",), None),
    ]
    assert document_from_parse_result("Only\r\nplain text", []).text == "Only\nplain text"
    with pytest.raises(ParseError, match=r"parser plugin returned no text"):
        document_from_parse_result("  ", [("", "Heading", 1, None)])
