import re
import pytest

from lucidrag.base.settings import parse_creation_settings
from lucidrag.ingestion.chunking import chunk_document, split_table, split_text
from lucidrag.ingestion.document import Document, Section

ZH = ("知识库是机器人回答问题的依据。运营人员上传公司文件后，系统会自动解析并切分文本！"
      "每一段都会保留标题和页码，方便引用？检索时先用关键词和向量找到候选段落；再按相关度排序。") * 6
EN = ("LucidRAG splits documents at headings first. Then it splits at paragraphs. "
      "Long paragraphs are split at sentence ends, and only then at words. ") * 12


def settings(**kw):
    return parse_creation_settings({"embedding_model_uuid": "m", **kw})


def test_empty_text_gives_no_chunks():
    assert split_text("", 100, 10) == []
    assert chunk_document(Document((Section("   "),), "text"), settings()).chunks == ()


def test_chinese_is_cut_only_at_sentence_ends():
    pieces = split_text(ZH, 100, 0)
    assert len(pieces) > 3
    assert all(len(p) <= 100 for p in pieces)
    for piece in pieces:
        assert re.search(r"[。！？；]$", piece), piece  # every piece ends on a sentence boundary


def test_english_pieces_respect_size_and_end_at_sentences():
    pieces = split_text(EN, 200, 0)
    assert all(len(p) <= 200 for p in pieces)
    assert all(p.rstrip().endswith(".") for p in pieces)
    # without overlap the pieces rebuild the text (modulo whitespace)
    assert " ".join(pieces).split() == EN.split()


def test_overlap_repeats_text_between_neighbours():
    pieces = split_text(EN, 200, 60)
    shared = [a for a, b in zip(pieces, pieces[1:]) if any(s in b for s in a.split(". ")[-2:] if s)]
    assert shared, "consecutive chunks should share overlapping sentences"


def test_a_sentence_longer_than_chunk_size_is_cut_at_clauses():
    long = "，".join(["这是一个没有句号的非常长的分句"] * 20) + "。"
    pieces = split_text(long, 60, 0)
    assert all(len(p) <= 60 for p in pieces)
    assert "".join(pieces) == long


def test_sections_are_never_merged_and_keep_heading_path_and_page():
    doc = Document((
        Section("Install with pip.", ("Guide", "Install", "Linux"), page=3),
        Section("Run lbp run.", ("Guide", "Usage"), page=4),
    ), "pdf")
    chunks = chunk_document(doc, settings()).chunks
    assert [c.text for c in chunks] == ["Install with pip.", "Run lbp run."]
    assert chunks[0].embed_text == "Guide › Install › Linux\nInstall with pip."
    assert (chunks[0].page, chunks[1].page) == (3, 4)
    assert [c.index for c in chunks] == [0, 1]


def test_every_piece_of_a_split_table_repeats_the_header():
    rows = "\n".join(f"| SKU-{i:04d} | Widget number {i} | {i * 3} |" for i in range(200))
    table = "| SKU | Name | Price |\n| --- | --- | --- |\n" + rows
    pieces = split_table(table, 300)
    assert len(pieces) > 5
    for piece in pieces:
        lines = piece.split("\n")
        assert lines[0] == "| SKU | Name | Price |" and lines[1] == "| --- | --- | --- |"
        assert len(piece) <= 300
    body = [line for p in pieces for line in p.split("\n")[2:]]
    assert body == rows.split("\n")  # every row exactly once, in order


def test_fixed_mode_uses_equal_windows_with_overlap():
    doc = Document((Section("x" * 1000),), "text")
    chunks = chunk_document(doc, settings(chunking="fixed", chunk_size=300, chunk_overlap=50)).chunks
    assert [len(c.text) for c in chunks][:3] == [300, 300, 300]
    assert len(chunks) == 4


def test_parent_child_children_point_at_a_bounded_parent_containing_them():
    doc = Document((Section(EN * 3, ("Manual",)),), "docx")
    s = settings(chunking="parent_child", chunk_size=256, chunk_overlap=32)
    result = chunk_document(doc, s)
    assert result.parents and all(len(p) <= s.parent_size for p in result.parents)
    for chunk in result.chunks:
        assert len(chunk.text) <= 128
        assert chunk.text in result.parents[chunk.parent]
    assert len(result.chunks) > len(result.parents)


# ---------------------------------------------------------------- packing invariants
import random  # noqa: E402

_EN_WORDS = ("descaling pump boiler gasket warranty filter pressure steam valve grinder water "
             "temperature cycle cleaning brew portafilter tamper reservoir heating element").split()
_ZH_WORDS = ["除垢", "水箱", "蒸汽", "压力", "滤网", "保修", "加热", "研磨", "清洁", "咖啡", "温度", "阀门"]


def _sentence(rng: random.Random, zh: bool) -> str:
    if zh:
        return "".join(rng.choice(_ZH_WORDS) for _ in range(rng.randint(3, 40))) + rng.choice("。！？")
    words = [rng.choice(_EN_WORDS) for _ in range(rng.randint(2, 30))]
    return " ".join(words).capitalize() + rng.choice(".!?")


def _document(rng: random.Random) -> Document:
    sections = []
    for s in range(rng.randint(1, 4)):
        zh = rng.random() < 0.4
        paragraphs = [(" " if not zh else "").join(_sentence(rng, zh) for _ in range(rng.randint(1, 8)))
                      for _ in range(rng.randint(1, 6))]
        sections.append(Section("\n\n".join(paragraphs), ("Zephyr-9 Manual", f"Part {s}")))
    return Document(tuple(sections), "docx")


def _locate(chunks, text: str) -> list[tuple[int, int]]:
    """Positions of consecutive chunks in `text`, each found at or after the previous start."""
    spans, at = [], 0
    for chunk in chunks:
        start = text.index(chunk.text, at)
        spans.append((start, start + len(chunk.text)))
        at = start + 1
    return spans


def test_packed_chunks_cover_each_section_once_and_none_is_a_fragment():
    rng = random.Random(11)
    s = settings()  # 512 / 64
    for _ in range(150):
        doc = _document(rng)
        chunks = chunk_document(doc, s).chunks
        for section in doc.sections:
            own = [c for c in chunks if c.headings == section.headings]
            text = section.text.strip()
            spans = _locate(own, text)
            # covered exactly once apart from the declared overlap: no gap but whitespace, and a
            # chunk repeats at most chunk_overlap characters of the one before it
            assert spans[0][0] == 0 and spans[-1][1] == len(text)
            for (_, prev_end), (start, _) in zip(spans, spans[1:]):
                assert prev_end - start <= s.chunk_overlap
                assert not text[prev_end:start].strip()
            if len(text) <= s.chunk_size * 1.25:
                assert len(own) == 1  # a section up to 1.25 x chunk_size is one chunk
            else:
                assert all(s.chunk_size // 4 <= len(c.text) <= s.chunk_size for c in own)


def test_characters_sent_to_the_embedding_model_stay_close_to_the_document_text():
    rng = random.Random(7)
    s = settings()
    for _ in range(60):
        doc = _document(rng)
        embedded = sum(len(c.embed_text) for c in chunk_document(doc, s).chunks)
        assert embedded <= 1.15 * len(doc.text) + 40 * len(doc.sections)  # + one heading line each


def test_a_title_line_stays_with_its_text_and_no_short_tail_is_left():
    # the example: a 740-character abstract became chunks of 58, 512 and 167 characters
    abstract = " ".join([EN.split(". ")[i % 3] + "." for i in range(14)])[:740].rsplit(".", 1)[0] + "."
    text = "Structure-aware chunking for retrieval\n\n" + abstract
    chunks = chunk_document(Document((Section(text),), "text"), settings()).chunks
    assert all(c.headings == ("Structure-aware chunking for retrieval",) for c in chunks)
    assert all(c.embed_text.startswith("Structure-aware chunking for retrieval\n") for c in chunks)
    assert all(len(c.text) >= 128 for c in chunks), [len(c.text) for c in chunks]
    short = "Short title\n\n" + abstract[:600]
    (only,) = chunk_document(Document((Section(short),), "text"), settings()).chunks
    assert only.text == abstract[:600].strip() and only.heading == "Short title"


@pytest.mark.parametrize("title", [
    "How do I reset the router's admin password?",
    "路由器的管理密码如何重置？",
    "Liver function tests (Also called: LFT; hepatic panel)",
    "肝功能检查（肝功）",
    "Aspirin lowers the risk of a second stroke in older adults.",
    "Call the service desk first!",
])
def test_a_short_first_line_titles_the_text_under_it_however_it_ends(title: str):
    # an FAQ .txt: the question is the title of its answer, so every passage of a long answer
    # carries it; a paper's title may end with a period. Before, a first line ending in a
    # sentence mark or a bracket counted as text: only the first passage held it, and the others
    # lost what they are about (a line ending in a clause mark, "Note:", still is text:
    # test_chunking_edges)
    text = f"{title}\n\n" + EN
    chunks = chunk_document(Document((Section(text),), "text"), settings()).chunks
    assert len(chunks) > 1
    assert all(c.headings == (title,) for c in chunks)
    assert all(c.embed_text.startswith(title + "\n") for c in chunks)
