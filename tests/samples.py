"""Sample documents generated with the real writers (python-docx, python-pptx, openpyxl,
reportlab, pypdf), used by tests/test_parsing.py and bench/bench_parse.py."""

from __future__ import annotations

import datetime as dt
import io
import zipfile
import zlib

LOREM = (
    "Retrieval augmented generation combines a search step with a language model. The search "
    "step finds passages that answer the question, and the model writes the answer from them. "
)
CHINESE = (
    "知识库把上传的文件切分成小段落，并为每个段落计算向量。检索时系统先找到与问题最相近的段落，"
    "再把它们交给大模型生成回答。这样回答既有依据，也便于核对来源。"
)


def docx_bytes() -> bytes:
    import docx
    from docx.enum.style import WD_STYLE_TYPE

    document = docx.Document()
    document.add_heading("Product Guide", level=0)  # Title style
    document.add_paragraph("Intro paragraph before any chapter.")
    document.add_heading("Installation", level=1)
    document.add_paragraph("Run the installer and follow the prompts.")
    document.add_heading("Linux", level=2)
    document.add_paragraph("Use the package manager: apt install lucid.")
    document.add_paragraph("First step", style="List Bullet")
    table = document.add_table(rows=3, cols=2)
    for r, row in enumerate([("Option", "Default"), ("chunk_size", "512"), ("overlap", "64")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.add_heading("Usage", level=1)
    document.add_paragraph("Ask a question in the chat.")
    localized = document.styles.add_style("标题 1", WD_STYLE_TYPE.PARAGRAPH)
    localized.base_style = document.styles["Normal"]
    document.add_paragraph("常见问题", style=localized)
    document.add_paragraph("这里是中文段落。")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def pptx_bytes() -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    presentation = Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[1])  # title + content
    slide.shapes.title.text = "Quarterly Results"
    slide.placeholders[1].text_frame.text = "Revenue grew 12 percent"
    slide.notes_slide.notes_text_frame.text = "Mention the new region."
    group = slide.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(6), Inches(4), Inches(1)).text_frame.text = "Grouped remark"

    slide2 = presentation.slides.add_slide(presentation.slide_layouts[5])  # title only
    slide2.shapes.title.text = "Regional Table"
    shape = slide2.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(2))
    for r, row in enumerate([("Region", "Sales"), ("North", "100"), ("South", "80")]):
        for c, value in enumerate(row):
            shape.table.cell(r, c).text = value
    buffer = io.BytesIO()
    presentation.save(buffer)
    return buffer.getvalue()


def xlsx_bytes() -> bytes:
    from openpyxl import Workbook

    workbook = Workbook()
    sheet = workbook.active
    sheet.title = "Staff"
    sheet.append(["Name", "Age", "Joined", "Score"])
    sheet.append(["Alice", 30, dt.date(2021, 3, 4), 9.5])
    sheet.append([None, None, None, None])  # empty row: skipped
    sheet.append(["Bob", 41.0, dt.datetime(2020, 1, 2, 0, 0), 7.25])
    other = workbook.create_sheet("Notes")
    other.append(["Key", "Value"])
    other.append(["pipe|char", "line\nbreak"])
    workbook.create_sheet("Empty")
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def big_xlsx(path: str, rows: int = 150_000) -> None:
    from openpyxl import Workbook

    workbook = Workbook(write_only=True)
    sheet = workbook.create_sheet("Orders")
    sheet.append(["Order", "Customer", "Amount", "Date", "Status"])
    base = dt.date(2024, 1, 1)
    for i in range(rows):
        sheet.append([i + 1, f"Customer {i % 997}", round(i * 1.37, 2),
                      base + dt.timedelta(days=i % 365), "shipped" if i % 3 else "open"])
    workbook.save(path)


def _canvas(buffer):
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    return canvas.Canvas(buffer, pagesize=A4, pageCompression=1), A4


def pdf_bytes(pages: list[list[str]], outline: list[tuple[str, int, int]] = ()) -> bytes:
    """`pages` are lists of lines; `outline` entries are (title, level 0-based, page index)."""
    buffer = io.BytesIO()
    c, (width, height) = _canvas(buffer)
    by_page: dict[int, list[tuple[str, int]]] = {}
    for title, level, page in outline:
        by_page.setdefault(page, []).append((title, level))
    for index, lines in enumerate(pages):
        for n, (title, level) in enumerate(by_page.get(index, [])):
            key = f"bm{index}_{n}"
            c.bookmarkPage(key)
            c.addOutlineEntry(title, key, level=level)
        y = height - 72
        c.setFont("Helvetica", 11)
        for line in lines:
            c.drawString(72, y, line)
            y -= 16
        c.showPage()
    c.save()
    return buffer.getvalue()


def chinese_pdf_bytes() -> bytes | None:
    try:
        from reportlab.pdfbase import pdfmetrics
        from reportlab.pdfbase.cidfonts import UnicodeCIDFont

        pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    except Exception:  # noqa: BLE001 - no CJK font in this reportlab
        return None
    buffer = io.BytesIO()
    c, (width, height) = _canvas(buffer)
    c.setFont("STSong-Light", 12)
    y = height - 72
    text = CHINESE
    for start in range(0, len(text), 30):  # hard-wrapped every 30 characters
        c.drawString(72, y, text[start:start + 30])
        y -= 18
    c.showPage()
    c.save()
    return buffer.getvalue()


def image_only_pdf_bytes() -> bytes:
    buffer = io.BytesIO()
    c, (width, height) = _canvas(buffer)
    for _ in range(2):
        c.setFillColorRGB(0.2, 0.4, 0.6)
        c.rect(72, 72, width - 144, height - 144, fill=1)
        c.circle(width / 2, height / 2, 100, fill=1)
        c.showPage()
    c.save()
    return buffer.getvalue()


def encrypted_pdf_bytes(password: str = "secret") -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for page in PdfReader(io.BytesIO(pdf_bytes([["Top secret text"]]))).pages:
        writer.add_page(page)
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def owner_only_pdf_bytes() -> bytes:
    """Encrypted with an empty user password (printing/copy restrictions only): opens without one."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for page in PdfReader(io.BytesIO(pdf_bytes([["Restricted but readable text"]]))).pages:
        writer.add_page(page)
    writer.encrypt(user_password="", owner_password="owner", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def with_content_type(ooxml: bytes, old: str, new: str) -> bytes:
    """The same package with its main part declared under another content type (.docm, .dotx…)."""
    source = zipfile.ZipFile(io.BytesIO(ooxml))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "[Content_Types].xml":
                data = data.replace(old.encode(), new.encode())
            target.writestr(info, data)
    return buffer.getvalue()


def big_pdf(path: str, target_bytes: int = 5 * 1024 * 1024) -> int:
    """A text PDF of about `target_bytes` (uncompressed content streams); returns the page count."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(path, pagesize=A4, pageCompression=0)
    width, height = A4
    words = LOREM.split()
    pages = 0
    size = 0
    while size < target_bytes:
        if pages % 10 == 0:
            key = f"ch{pages}"
            c.bookmarkPage(key)
            c.addOutlineEntry(f"Chapter {pages // 10 + 1}", key, level=0)
        c.setFont("Helvetica", 9)
        y = height - 40
        line_no = 0
        while y > 40:
            start = (pages * 7 + line_no * 3) % len(words)
            line = " ".join((words * 3)[start:start + 16])
            c.drawString(36, y, line)
            size += len(line) + 30
            y -= 11
            line_no += 1
        c.showPage()
        pages += 1
    c.save()
    return pages


def zip_bytes(members: dict[str, bytes], utf8_names: bool = True) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def ole_bytes(stream_name: str) -> bytes:
    """A minimal byte string that looks like an OLE compound file holding `stream_name`."""
    return (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504 + stream_name.encode("utf-16-le")
            + b"\x00" * 1024)


def shared_content_pdf(pages: int, operators: int) -> bytes:
    """A small PDF whose pages share one compressed content stream of `operators` text operators:
    PDFium takes ~1.5 s per page of 100,000 (r03 of the hostile review)."""
    stream = zlib.compress(b"BT /F1 10 Tf 1 TL 10 700 Td " + b"(Lorem ipsum dolor sit amet) ' " * operators + b"ET", 9)
    kids = b" ".join(b"%d 0 R" % (5 + i) for i in range(pages))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages,
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
               b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream"]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                b"/Contents 4 0 R >>"] * pages
    return pdf_of_objects(objects)


def pdf_of_objects(objects: list[bytes]) -> bytes:
    """A PDF file of these object bodies (numbered from 1; object 1 the catalog) with its xref table."""
    out, offsets = bytearray(b"%PDF-1.7\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)
