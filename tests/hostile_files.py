"""Hostile but legal files, generated with the real writers: used by tests/test_hostile.py and
bench/bench_hostile.py. Every generator is deterministic and takes its size as an argument."""

from __future__ import annotations

import io
import json
import random
import string
import zipfile

from tests import samples


def long_line(chars: int, *, cjk: bool = False, seed: int = 7) -> bytes:
    """One line of `chars` characters without whitespace or punctuation (Latin or CJK)."""
    rng = random.Random(seed)
    if cjk:
        text = "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(chars))
    else:
        text = "".join(rng.choices(string.ascii_letters + string.digits, k=chars))
    return text.encode("utf-8")


def words_line(chars: int, seed: int = 7) -> bytes:
    """One line of words separated by spaces, with no sentence end and no line break."""
    rng = random.Random(seed)
    words: list[str] = []
    total = 0
    while total < chars:
        word = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9)))
        words.append(word)
        total += len(word) + 1
    return " ".join(words)[:chars].encode()


def wide_rows(columns: int, rows: int) -> list[list[str]]:
    header = [f"col_{c:05d}" for c in range(columns)]
    return [header] + [[str((r * 7 + c) % 100) for c in range(columns)] for r in range(rows)]


def wide_csv(columns: int = 5000, rows: int = 7) -> bytes:
    """5,000 columns × 7 rows: a 154 KB CSV."""
    return "\n".join(",".join(row) for row in wide_rows(columns, rows)).encode()


def wide_xlsx(columns: int = 5000, rows: int = 7) -> bytes:
    from openpyxl import Workbook

    workbook = Workbook(write_only=True)
    sheet = workbook.create_sheet("Wide")
    for row in wide_rows(columns, rows):
        sheet.append([int(v) if v.isdigit() else v for v in row])
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def wide_html(columns: int = 2000, rows: int = 5) -> bytes:
    table = wide_rows(columns, rows)
    head = "".join(f"<th>{c}</th>" for c in table[0])
    body = "".join("<tr>" + "".join(f"<td>{v}</td>" for v in row) + "</tr>" for row in table[1:])
    return (f"<html><body><h1>Wide</h1><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></body></html>").encode()


def ragged_csv(columns: int, rows: int) -> bytes:
    """A very wide header followed by many one-cell rows (padding every row would be quadratic)."""
    header = ",".join(f"c{c}" for c in range(columns))
    return (header + "\n" + "\n".join(f"row {r}" for r in range(rows))).encode()


def text_bomb_zip(members: int = 100, chars_per_member: int = 2_000_000) -> bytes:
    """A small archive of highly compressible text files: a 580 KB zip that expands to
    199 million characters is members=100, chars_per_member=2,000,000 (roughly)."""
    sentence = "The quarterly report lists revenue, costs and the outlook for every region. "
    body = (sentence * (chars_per_member // len(sentence) + 1))[:chars_per_member].encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for n in range(members):
            archive.writestr(f"report_{n:03d}.txt", body)
    return buffer.getvalue()


def deep_json(depth: int, leaves: int = 1) -> bytes:
    """`leaves` values at the bottom of `depth` nested objects: every leaf's path is `depth` long."""
    bottom = "[" + ",".join("1" for _ in range(leaves)) + "]" if leaves > 1 else '"leaf"'
    return ('{"a":' * depth + bottom + "}" * depth).encode()


def many_headings_markdown(headings: int) -> bytes:
    return "".join(f"{'#' * (1 + n % 6)} Heading {n}\n\nBody {n}.\n\n" for n in range(headings)).encode()


def bare_headings_markdown(headings: int) -> bytes:
    """ATX headings of every level, one a line, nothing under them."""
    return "".join(f"{'#' * (1 + n % 6)} h{n}\n" for n in range(headings)).encode()


def json_flat_numbers(count: int) -> bytes:
    """A JSON array of `count` numbers (2 bytes each)."""
    return ("[" + ",".join("1" for _ in range(count)) + "]").encode()


def csv_one_wide_row(columns: int) -> bytes:
    """A header of `columns` names and one row of as many values."""
    return (",".join(f"c{i}" for i in range(columns)) + "\n" + ",".join("1" for _ in range(columns)) + "\n").encode()


def long_heading_markdown(heading_chars: int, body_chars: int) -> bytes:
    title = "".join(random.Random(3).choices(string.ascii_lowercase + " ", k=heading_chars))
    body = "Body text of the section. " * (body_chars // 26)
    return f"# {title}\n\n{body}\n".encode()


def docx_big_table(rows: int, columns: int) -> bytes:
    import docx

    document = docx.Document()
    document.add_paragraph("A document with one big table.")
    table = document.add_table(rows=rows, cols=columns)
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            cell.text = f"r{r}c{c}"
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def many_pages_pdf(pages: int) -> bytes:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    c = canvas.Canvas(buffer, pagesize=A4, pageCompression=1)
    for n in range(pages):
        c.setFont("Helvetica", 4)
        c.drawString(20, 800, f"page {n} tiny text")
        c.showPage()
    c.save()
    return buffer.getvalue()


def jsonl_lines(lines: int) -> bytes:
    return "\n".join(json.dumps({"id": n, "v": f"value {n}"}) for n in range(lines)).encode()


def docx_xml_bomb(paragraphs: int) -> bytes:
    """A real .docx whose document.xml holds `paragraphs` tiny paragraphs: it compresses ~300×."""

    source = zipfile.ZipFile(io.BytesIO(samples.docx_bytes()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "word/document.xml":
                xml = data.decode()
                at = xml.index("<w:body>") + len("<w:body>")
                data = (xml[:at] + "<w:p><w:r><w:t>x</w:t></w:r></w:p>" * paragraphs + xml[at:]).encode()
            out.writestr(info.filename, data)
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------
# Files built to inflate, allocate or stall while they are read (tests/test_hostile_corpus.py,
# bench/bench_hostile.py). Each is small on disk; the docstring says what it turns into.


def _png(width: int = 40, height: int = 40, mode: str = "RGB") -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new(mode, (width, height), "white").save(buffer, "PNG")
    return buffer.getvalue()


def _rezip(source: bytes, replace: dict[str, object]) -> bytes:
    """The zip `source` with some members replaced: bytes, or a callable writing to a stream (for
    members too large to hold)."""
    src = zipfile.ZipFile(io.BytesIO(source))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        names = [info.filename for info in src.infolist()]
        for name in names + [n for n in replace if n not in names]:
            content = replace.get(name, src.read(name) if name in names else b"")
            if callable(content):
                with archive.open(name, "w") as stream:
                    content(stream)
            else:
                archive.writestr(name, content)
    return out.getvalue()


def _zeros(megabytes: int, head: bytes = b""):
    def write(stream) -> None:
        stream.write(head)
        block = bytes(1 << 20)
        for _ in range(megabytes):
            stream.write(block)
    return write


def docx_media_bomb(megabytes: int = 400) -> bytes:
    """A .docx with one paragraph and a picture whose part is a PNG header and `megabytes` MB of
    zeros (~1,000:1): python-docx reads every part whole."""
    import docx

    document = docx.Document()
    document.add_paragraph("Quarterly report. The solar array on building C produces 42 kilowatts.")
    document.add_picture(io.BytesIO(_png()))
    raw = io.BytesIO()
    document.save(raw)
    media = next(n for n in zipfile.ZipFile(raw).namelist() if n.startswith("word/media/"))
    return _rezip(raw.getvalue(), {media: _zeros(megabytes, _png())})


def pptx_media_bomb(megabytes: int = 400) -> bytes:
    """A .pptx slide with a title and a picture that inflates to `megabytes` MB."""
    from pptx import Presentation

    presentation = Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])
    slide.shapes.title.text = "Solar array output"
    slide.shapes.add_picture(io.BytesIO(_png()), 0, 0)
    raw = io.BytesIO()
    presentation.save(raw)
    media = next(n for n in zipfile.ZipFile(raw).namelist() if n.startswith("ppt/media/"))
    return _rezip(raw.getvalue(), {media: _zeros(megabytes, _png())})


def _xlsx(cells: dict[str, object]) -> bytes:
    from openpyxl import Workbook

    workbook = Workbook()
    sheet = workbook.active
    sheet.title = "Prices"
    for ref, value in cells.items():
        sheet[ref] = value
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def xlsx_sparse(last_cell: str = "XFD1048576") -> bytes:
    """A 5 KB .xlsx: a small table and one value at `last_cell`. calamine allocates the dense range
    between them (XFD1048576: 17 billion cells, 512 GiB: the process aborts)."""
    return _xlsx({"A1": "Product", "B1": "Price", "A2": "Oolong tea", "B2": 12, last_cell: "end"})


def xlsx_sparse_unusual_xml(last_cell: str = "XFD1048576") -> bytes:
    """The same stray value written as some generators do: `r` after another attribute and a row
    without a number (the fast scan cannot read it; the exact walk does)."""
    data = xlsx_sparse("C3")
    sheet = zipfile.ZipFile(io.BytesIO(data)).read("xl/worksheets/sheet1.xml").decode()
    sheet = sheet.replace('<c r="C3" t="inlineStr">', f'<c t="inlineStr" r="{last_cell}">')
    sheet = sheet.replace("</sheetData>", "<row><c><v>7</v></c></row></sheetData>")
    return _rezip(data, {"xl/worksheets/sheet1.xml": sheet.encode()})


def pdf_shared_content(pages: int = 8, operators: int = 100_000) -> bytes:
    """A PDF whose `pages` pages all draw one compressed content stream of `operators` text
    operators (~10 KB on disk; PDFium runs it once per page, ~1.5 s each)."""
    return samples.shared_content_pdf(pages, operators)


def pdf_many_pages(pages: int = 6000) -> bytes:
    """`pages` pages sharing one tiny content stream: a few hundred KB."""
    return pdf_shared_content(pages, 1)


def json_records(megabytes: float, seed: int = 7) -> bytes:
    """A JSON array of small product records, `megabytes` MB."""
    rng = random.Random(seed)
    block = ",".join('{"sku":"T-%d","name":"oolong %d","price":%d}' % (
        rng.randrange(10**6), rng.randrange(10**4), rng.randrange(999)) for _ in range(20_000))
    return ("[" + ",".join([block] * max(1, int(megabytes * 1_000_000) // len(block))) + "]").encode()


def zip_of(name: str, member: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr(name, member)
    return buffer.getvalue()


def markdown_paragraphs(megabytes: float, seed: int = 7) -> bytes:
    """Paragraphs of words under a heading every ~10 paragraphs, `megabytes` MB."""
    rng = random.Random(seed)
    parts: list[str] = []
    for n in range(2000):
        words = " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(12))
        parts.append((f"## Section {n}\n\n" if n % 10 == 0 else "") + words + ".\n\n")
    block = "".join(parts)
    return (block * (int(megabytes * 1_000_000) // len(block) + 1)).encode()


def html_many_tags(megabytes: float, seed: int = 7) -> bytes:
    """Short paragraphs with a bold word each (2 elements per ~50 bytes), `megabytes` MB."""
    rng = random.Random(seed)
    block = "".join("<p>" + " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9)))
                                     for _ in range(4)) + " <b>bold</b></p>\n" for _ in range(2000))
    return ("<html><body>" + block * (int(megabytes * 1_000_000) // len(block)) + "</body></html>").encode()


def html_paragraphs(megabytes: float, seed: int = 7) -> bytes:
    """An ordinary long page: headings and paragraphs of 12 words with a bold phrase (~2 elements
    per 100 bytes), `megabytes` MB."""
    rng = random.Random(seed)
    parts = []
    for n in range(2000):
        words = " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(12))
        parts.append((f"<h2>Section {n}</h2>" if n % 10 == 0 else "") + f"<p>{words} <b>bold</b></p>\n")
    block = "".join(parts)
    return ("<html><body>" + block * (int(megabytes * 1_000_000) // len(block)) + "</body></html>").encode()


def gbk_text(megabytes: float, seed: int = 7) -> bytes:
    """Chinese sentences encoded as GBK (GB18030), `megabytes` MB."""
    rng = random.Random(seed)
    common = [chr(c) for c in range(0x4E00, 0x9FA5) if len(chr(c).encode("gb2312", "ignore")) == 2][:3000]
    block = "".join("".join(rng.choices(common, k=40)) + "。\n" for _ in range(2000))
    return (block * (int(megabytes * 1_000_000) // len(block.encode("gb18030")) + 1)).encode("gb18030")


def ods_repeated(rows: int = 1_000, columns: int = 16_384) -> bytes:
    """A 1 KB .ods: a header, then one row repeated `rows` times whose one valued cell is
    repeated `columns` times. calamine expands both as it opens the file (16 million cells took
    1 GB; past about a billion it refuses the file instead)."""
    cell = '<table:table-cell office:value-type="string"><text:p>{}</text:p></table:table-cell>'
    rows_xml = ("<table:table-row>" + cell.format("Product") + cell.format("Price") + "</table:table-row>"
                f'<table:table-row table:number-rows-repeated="{rows}"><table:table-cell '
                f'table:number-columns-repeated="{columns}" office:value-type="float" office:value="1"/>'
                "</table:table-row>")
    content = ('<?xml version="1.0" encoding="UTF-8"?><office:document-content '
               'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
               'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
               'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2">'
               '<office:body><office:spreadsheet><table:table table:name="Prices">' + rows_xml
               + "</table:table></office:spreadsheet></office:body></office:document-content>")
    manifest = ('<?xml version="1.0" encoding="UTF-8"?><manifest:manifest '
                'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
                '<manifest:file-entry manifest:full-path="/" '
                'manifest:media-type="application/vnd.oasis.opendocument.spreadsheet"/>'
                '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
                "</manifest:manifest>")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.spreadsheet")
        archive.writestr("META-INF/manifest.xml", manifest)
        archive.writestr("content.xml", content)
    return out.getvalue()


def _declare_size(archive: bytes, name: str, size: int) -> bytes:
    """The zip with `name`'s uncompressed size rewritten to `size` in its local header and its
    central directory entry (the CRC is left: the data no longer matches what the file claims)."""
    data = bytearray(archive)
    reader = zipfile.ZipFile(io.BytesIO(archive))
    offset = reader.getinfo(name).header_offset
    data[offset + 22: offset + 26] = size.to_bytes(4, "little")
    entry = reader.start_dir
    while data[entry: entry + 4] == b"PK\x01\x02":
        name_length, extra, comment = (int.from_bytes(data[entry + at: entry + at + 2], "little") for at in (28, 30, 32))
        if data[entry + 46: entry + 46 + name_length] == name.encode():
            data[entry + 24: entry + 28] = size.to_bytes(4, "little")
            return bytes(data)
        entry += 46 + name_length + extra + comment
    raise KeyError(name)


def xlsx_lying_sheet(rows: int = 12_000_000) -> bytes:
    """An .xlsx whose sheet holds `rows` rows of one value (~300 MB of XML, ~0.3 MB compressed)
    but declares 1 KB: a check that trusts the declared size passes it, and calamine, which
    inflates past it, builds a grid of `rows` cells."""
    data = _xlsx({"A1": "Product", "B1": "Price"})
    sheet = zipfile.ZipFile(io.BytesIO(data)).read("xl/worksheets/sheet1.xml").decode()
    head, tail = sheet.split("</sheetData>")

    def write(stream) -> None:
        stream.write(head.encode())
        block = b"<row><c><v>1</v></c></row>" * 10_000
        for _ in range(rows // 10_000):
            stream.write(block)
        stream.write(b"</sheetData>" + tail.encode())
    return _declare_size(_rezip(data, {"xl/worksheets/sheet1.xml": write}), "xl/worksheets/sheet1.xml", 1024)


def docx_lying_picture(megabytes: int = 300) -> bytes:
    """A .docx whose picture inflates to `megabytes` MB but declares 1 KB."""
    data = docx_media_bomb(megabytes)
    media = next(n for n in zipfile.ZipFile(io.BytesIO(data)).namelist() if n.startswith("word/media/"))
    return _declare_size(data, media, 1024)


def docx_empty_paragraphs(paragraphs: int = 5_000_000) -> bytes:
    """A .docx of `paragraphs` empty paragraphs (`<w:p/>`, 30 MB of XML in ~0.4 MB: padded with a
    random picture to stay inside the 100× ratio); python-docx holds ~130 bytes per element."""
    import os


    source = zipfile.ZipFile(io.BytesIO(samples.docx_bytes()))
    xml = source.read("word/document.xml").decode()
    at = xml.index("<w:body>") + len("<w:body>")
    body = ("<w:p><w:r><w:t>Quarterly report.</w:t></w:r></w:p>" + "<w:p/>" * paragraphs).encode()
    return _rezip(samples.docx_bytes(), {"word/document.xml": xml[:at].encode() + body + xml[at:].encode(),
                                         "word/media/padding.bin": os.urandom(len(body) // 90)})


def png_pixels(width: int, height: int, mode: str = "RGB") -> bytes:
    """A blank picture of width × height pixels (a few hundred KB: blank rows compress well)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new(mode, (width, height), "white").save(buffer, "PNG", compress_level=9)
    return buffer.getvalue()


def jpeg_pixels(width: int, height: int) -> bytes:
    """A blank JPEG photo of width × height pixels (a few hundred KB)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buffer, "JPEG", quality=50)
    return buffer.getvalue()


def tiff_pages(pages: int, side: int = 64) -> bytes:
    """A TIFF of `pages` small blank pages."""
    from PIL import Image

    frames = [Image.new("L", (side, side), 255) for _ in range(pages)]
    buffer = io.BytesIO()
    frames[0].save(buffer, "TIFF", save_all=True, append_images=frames[1:], compression="tiff_deflate")
    return buffer.getvalue()


def deep_html(depth: int = 50_000) -> bytes:
    """`depth` nested <div>s around one sentence, under a heading."""
    return ("<html><body><h1>Solar report</h1>" + "<div>" * depth + "The solar array produces 42 kilowatts."
            + "</div>" * depth + "<p>Measured in June.</p></body></html>").encode()


def text_of_chars(chars: int, fmt: str) -> bytes:
    """At least `chars` characters of words (ASCII) as .txt, .csv, .jsonl or .html (a page of few
    tags)."""
    line = "The quarterly report lists revenue costs and the outlook for every region"
    row = {"csv": "r{n},{line}\n", "jsonl": '{{"n":{n},"v":"{line}"}}\n'}.get(fmt, "{n:>4} {line}.\n")
    rows = "".join(row.format(n=n % 100, line=line) for n in range(100))
    body = rows * (chars // len(rows) + 1)
    if fmt == "csv":
        return ("region,notes\n" + body).encode()
    if fmt == "html":
        return f"<html><body><pre>{body}</pre></body></html>".encode()
    return body.encode()


def pdf_poster_page(points: int = 14_400) -> bytes:
    """One page of `points` × `points` (14,400: 200 inches, the most PDF allows) with no text: it
    is rendered for OCR."""
    return samples.pdf_of_objects([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                 b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents 4 0 R >>" % (points, points),
                 b"<< /Length 20 >>\nstream\n0 0 0 rg 10 10 50 50 re f\nendstream"])


def zip_of_texts(members: int, chars: int, seed: int = 7) -> bytes:
    """`members` .txt files of `chars` characters of random words each (~3:1 compressed): a zip
    near the characters limit and inside the ratio."""
    rng = random.Random(seed)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for n in range(members):
            words = " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9)))
                             for _ in range(chars // 6))
            lines = "\n".join(words[i:i + 80] for i in range(0, chars, 80))
            archive.writestr(f"notes_{n}.txt", lines[:chars])
    return buffer.getvalue()
