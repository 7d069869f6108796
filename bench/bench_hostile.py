"""Hostile but legal files: time, characters and peak memory of parse + chunk.

    .venv/bin/python bench/bench_hostile.py [CASE ...] [--timeout S] [--mem-limit-mb MB] [--list]

Each case runs in a fresh subprocess under an address-space limit (so a runaway case fails with
MemoryError instead of taking the machine) and a timeout. Columns:

    file KB      size of the generated file
    parse s      parse_file (bytes → Document), or the time to its failure
    chunk s      chunk_document with the default settings (structure, 512 / 64)
    doc chars    characters of the parsed document's text
    chunks       chunks produced
    embedded     characters sent to the embedding model (the chunks' embed_text)
    ratio        embedded / doc chars
    idle MB      resident memory of the child once every reader is imported (and, for pictures, the
                 OCR models loaded, as they stay in a parse worker) before the parse
    +MB          peak resident memory over idle: what the parse and chunking took (limit 512)
    status       ok, FAILED: <the operator's message>, TIMEOUT, or the exception
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _cases() -> dict[str, tuple[str, object]]:
    from tests import binary_workbooks as b
    from tests import hostile_files as h

    return {
        "line_latin_2mb": ("line.txt", lambda: h.long_line(2_000_000)),
        "line_latin_9.9mb": ("line.txt", lambda: h.long_line(9_900_000)),
        "line_cjk_2mb": ("line.txt", lambda: h.long_line(700_000, cjk=True)),
        "words_line_2mb": ("words.txt", lambda: h.words_line(2_000_000)),
        "csv_5000_cols": ("wide.csv", lambda: h.wide_csv(5000, 7)),
        "csv_100k_cols": ("wide.csv", lambda: h.wide_csv(100_000, 1)),
        "csv_ragged_20k": ("ragged.csv", lambda: h.ragged_csv(20_000, 20_000)),
        "xlsx_5000_cols": ("wide.xlsx", lambda: h.wide_xlsx(5000, 7)),
        "html_2000_cols": ("wide.html", lambda: h.wide_html(2000, 5)),
        "zip_text_bomb": ("bomb.zip", lambda: h.text_bomb_zip(100, 2_000_000)),
        "json_deep_900x100k": ("deep.json", lambda: h.deep_json(900, leaves=100_000)),
        "md_100k_headings": ("headings.md", lambda: h.many_headings_markdown(100_000)),
        "md_100k_char_heading": ("heading.md", lambda: h.long_heading_markdown(100_000, 1_000_000)),
        "docx_table_2000x20": ("table.docx", lambda: h.docx_big_table(2000, 20)),
        "docx_xml_bomb_1m": ("memo.docx", lambda: h.docx_xml_bomb(1_000_000)),
        "pdf_10k_pages": ("pages.pdf", lambda: h.many_pages_pdf(10_000)),
        "jsonl_100k_lines": ("lines.jsonl", lambda: h.jsonl_lines(100_000)),
        # Built to inflate, allocate or stall while read (tests/test_hostile_corpus.py)
        "docx_media_400mb": ("report.docx", lambda: h.docx_media_bomb(400)),
        "pptx_media_400mb": ("slides.pptx", lambda: h.pptx_media_bomb(400)),
        "xlsx_cell_XFD1048576": ("prices.xlsx", lambda: h.xlsx_sparse("XFD1048576")),
        "xls_declares_4g_rows": ("prices.xls", lambda: b.xls_workbook({"Prices": b.Sheet(
            {(0, 0): "Part", (1, 0): 1.0}, (0, 0xFFFFFFFF, 0, 256))})),
        "xls_cell_col_65536": ("prices.xls", lambda: b.xls_workbook({"Prices": b.Sheet(
            {(0, 0): "Part", (65535, 65535): 1.0}, (0, 1, 0, 1))})),
        "xlsb_cell_XFD1048576": ("prices.xlsb", lambda: b.xlsb_workbook({"Prices": {(0, 0): "Part", (1048575, 16383): 1.0}})),
        "pdf_shared_stream": ("shared.pdf", lambda: h.pdf_shared_content(12, 100_000)),
        "pdf_6000_pages": ("pages.pdf", lambda: h.pdf_many_pages(6000)),
        "zip_json_44mb": ("catalogue.zip", lambda: h.zip_of("catalogue.json", h.json_records(44))),
        "zip_md_14mb": ("notes.zip", lambda: h.zip_of("notes.md", h.markdown_paragraphs(14))),
        "html_420k_tags": ("page.html", lambda: h.html_many_tags(9.5)),
        "ods_16m_cells": ("prices.ods", lambda: h.ods_repeated(1_000, 16_384)),
        "xlsx_sheet_lies_300mb": ("prices.xlsx", lambda: h.xlsx_lying_sheet()),
        "docx_picture_lies_300mb": ("report.docx", lambda: h.docx_lying_picture()),
        "docx_5m_empty_paras": ("memo.docx", lambda: h.docx_empty_paragraphs(5_000_000)),
        "png_rgba_59mp": ("poster.png", lambda: h.png_pixels(7700, 7700, "RGBA")),
        "png_rgb_59mp": ("poster.png", lambda: h.png_pixels(7700, 7700)),
        "jpeg_59mp": ("photo.jpg", lambda: h.jpeg_pixels(7700, 7700)),
        "tiff_300_pages": ("scan.tif", lambda: h.tiff_pages(300)),
        "pdf_200_inch_page": ("poster.pdf", lambda: h.pdf_poster_page()),
        "html_50k_nested_divs": ("deep.html", lambda: h.deep_html(50_000)),
        "json_100k_deep": ("deep.json", lambda: h.deep_json(100_000)),
        "txt_13m_chars": ("notes.txt", lambda: h.text_of_chars(13_000_000, "txt")),
        "jsonl_10m_chars": ("notes.jsonl", lambda: h.text_of_chars(10_000_000, "jsonl")),
        "zip_9_texts_9.9m_chars": ("notes.zip", lambda: h.zip_of_texts(9, 1_100_000)),
        # The largest ordinary uploads (LangBot accepts 10 MB)
        "json_9.5mb": ("records.json", lambda: h.json_records(9.5)),
        "md_10mb": ("notes.md", lambda: h.markdown_paragraphs(9.9)),
        "html_10mb_210k_tags": ("page.html", lambda: h.html_paragraphs(9.9)),
        "html_7mb_148k_tags": ("page.html", lambda: h.html_paragraphs(7)),
        "txt_gbk_10mb": ("notes.txt", lambda: h.gbk_text(9.9)),
    }


# Read by OCR: idle counts the OCR models loaded, as they stay in a parse worker once it has read a picture
_OCR_CASES = frozenset({"png_rgba_59mp", "png_rgb_59mp", "jpeg_59mp", "tiff_300_pages", "pdf_200_inch_page"})


def _cached(case: str, cache: str) -> str:
    """The case's file, generated once (by the driver: generating would count in the child's peak)."""
    name, make = _cases()[case]
    path = os.path.join(cache, f"{case}-{name}")
    if not os.path.exists(path):
        data = make()  # type: ignore[operator]
        with open(path + ".tmp", "wb") as handle:
            handle.write(data)
        os.replace(path + ".tmp", path)
    return path


def _child(case: str, cache: str, mem_limit_mb: int) -> None:
    name = _cases()[case][0]
    with open(_cached(case, cache), "rb") as handle:
        data = handle.read()

    from lucidrag.base.errors import LucidRagError
    from lucidrag.base.settings import parse_creation_settings
    from lucidrag.ingestion.chunking import chunk_document
    from lucidrag.ingestion.ingest import file_record
    from lucidrag.ingestion.parsing import parse_file

    from tests.ingest_child import peak_rss_mb, picture_of_text, readers

    readers()
    if case in _OCR_CASES:
        parse_file(picture_of_text(), "warm.png")
    idle = peak_rss_mb()
    if mem_limit_mb:
        limit = mem_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    result: dict[str, object] = {"kb": len(data) / 1024, "idle_mb": idle}
    start = time.perf_counter()
    try:
        document = parse_file(data, "v1/bench/" + name)
        result["parse_s"] = time.perf_counter() - start
        result["doc_chars"] = len(document.text)
        start = time.perf_counter()
        chunked = chunk_document(document, parse_creation_settings({"embedding_model_uuid": "m"}))
        result["chunk_s"] = time.perf_counter() - start
        record = file_record("bench", document.format, chunked)
        result["chunks"] = len(record.chunks)
        result["embedded"] = sum(len(c.text) for c in record.chunks)
        result["status"] = "ok"
    except LucidRagError as error:
        result["status"] = f"FAILED: {error}"
    except MemoryError:
        result["status"] = f"MemoryError (over {mem_limit_mb} MB)"
    result.setdefault("parse_s", time.perf_counter() - start)  # to the verdict, when parsing failed
    result["rss_mb"] = peak_rss_mb()
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", nargs="*")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--mem-limit-mb", type=int, default=4000)
    parser.add_argument("--cache", default=os.path.join("/tmp", "lucidrag-bench-hostile"))
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.makedirs(args.cache, exist_ok=True)
    if args.child:
        _child(args.child, args.cache, args.mem_limit_mb)
        return
    cases = args.cases or list(_cases())
    if args.list:
        print("\n".join(cases))
        return
    print(f"{'case':<22}{'file KB':>9}{'parse s':>9}{'chunk s':>9}{'doc chars':>13}{'chunks':>9}"
          f"{'embedded':>14}{'ratio':>7}{'idle MB':>8}{'+MB':>6}  status", flush=True)
    for case in cases:
        _cached(case, args.cache)
        start = time.perf_counter()
        try:
            out = subprocess.run([sys.executable, __file__, "--child", case, "--cache", args.cache,
                                  "--mem-limit-mb", str(args.mem_limit_mb)],
                                 capture_output=True, text=True, timeout=args.timeout, cwd=ROOT)
        except subprocess.TimeoutExpired:
            print(f"{case:<22}{'':>9}  TIMEOUT after {time.perf_counter() - start:.0f} s", flush=True)
            continue
        lines = out.stdout.strip().splitlines()
        if out.returncode or not lines:
            print(f"{case:<22}  crashed (exit {out.returncode}): {out.stderr.strip().splitlines()[-1:]}", flush=True)
            continue
        r = json.loads(lines[-1])
        doc, emb = r.get("doc_chars"), r.get("embedded")
        ratio = f"{emb / doc:.2f}" if doc and emb else "-"

        def num(key: str, fmt: str) -> str:
            return format(r[key], fmt) if key in r else "-"

        status = str(r["status"])
        print(f"{case:<22}{r['kb']:>9.0f}{num('parse_s', '.2f'):>9}{num('chunk_s', '.2f'):>9}"
              f"{num('doc_chars', ','):>13}{num('chunks', ','):>9}{num('embedded', ','):>14}{ratio:>7}"
              f"{r['idle_mb']:>8.0f}{r['rss_mb'] - r['idle_mb']:>6.0f}  {status[:150]}", flush=True)


if __name__ == "__main__":
    main()
