"""Hostile but legal files, generated with the real writers: used by tests/test_hostile.py and
bench/bench_hostile.py. Every generator is deterministic and takes its size as an argument."""

from __future__ import annotations

import io
import json
import random
import string
import zipfile


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
    from tests import samples

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
