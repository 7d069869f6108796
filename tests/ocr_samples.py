"""Pictures of text rendered at test time (Pillow + Debian's fonts-wqy-microhei, which .ci/run
installs), and the scans, office files and mixed PDFs built from them. Also used by
bench/bench_ocr.py, so the benchmark and the tests read the same kind of page."""

from __future__ import annotations

import io
import random
from pathlib import Path

FONT_PATHS = (
    Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
    Path("/usr/share/fonts/wqy-microhei/wqy-microhei.ttc"),
)


def font_path() -> Path | None:
    return next((p for p in FONT_PATHS if p.exists()), None)


NO_FONT = "no CJK font (apt-get install fonts-wqy-microhei; .ci/run installs it)"


def render(paragraphs: list[str], *, dpi: int = 150, width_in: float = 8.27, point: float = 12,
           height_in: float | None = None):  # noqa: ANN201 - PIL.Image.Image
    """A white page with `paragraphs` in black at `point` size, wrapped to the page width, a blank
    line between paragraphs: what a scanner makes of a printed page at `dpi`."""
    from PIL import Image, ImageDraw, ImageFont

    path = font_path()
    assert path is not None, NO_FONT
    font = ImageFont.truetype(str(path), round(point * dpi / 72))
    margin = round(0.8 * dpi)
    width = round(width_in * dpi)
    line_height = round(point * dpi / 72 * 1.5)
    lines: list[str] = []
    probe = ImageDraw.Draw(Image.new("L", (1, 1)))
    for paragraph in paragraphs:
        current = ""
        for token in _tokens(paragraph):
            trial = current + token
            if current and probe.textlength(trial.rstrip(), font=font) > width - 2 * margin:
                lines.append(current.rstrip())
                current = token.lstrip()
            else:
                current = trial
        lines.append(current.rstrip())
        lines.append("")
    height = round(height_in * dpi) if height_in else 2 * margin + line_height * len(lines)
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    for row, line in enumerate(lines):
        draw.text((margin, margin + row * line_height), line, font=font, fill="black")
    return image


def _tokens(text: str) -> list[str]:
    """Words with their following space for Latin text, single characters for CJK."""
    tokens: list[str] = []
    word = ""
    for ch in text:
        if ch == " ":
            tokens.append(word + " ")
            word = ""
        elif ord(ch) > 0x2E80:
            if word:
                tokens.append(word)
                word = ""
            tokens.append(ch)
        else:
            word += ch
    if word:
        tokens.append(word)
    return tokens


def photo_like(image, seed: int = 7):  # noqa: ANN001, ANN201
    """A phone photo of the page: grey uneven light, sensor noise, blur, a slight tilt, JPEG."""
    import numpy as np
    from PIL import Image, ImageFilter

    rng = np.random.default_rng(seed)
    pixels = np.asarray(image.convert("L"), dtype=np.float32)
    height, width = pixels.shape
    light = np.linspace(0.78, 0.95, width, dtype=np.float32)[None, :]
    pixels = pixels * light + rng.normal(0, 14, pixels.shape).astype(np.float32)
    noisy = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(0.9))
    noisy = noisy.rotate(random.Random(seed).choice((-2.5, 2.5)), expand=True, fillcolor=200)
    buffer = io.BytesIO()
    noisy.save(buffer, "JPEG", quality=45)
    return Image.open(io.BytesIO(buffer.getvalue()))


def image_bytes(image, fmt: str = "PNG", **options) -> bytes:  # noqa: ANN001
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def scanned_pdf(pages: list, dpi: int = 150) -> bytes:
    """A PDF whose pages are only pictures (what a scanner writes): no text layer."""
    buffer = io.BytesIO()
    first, *rest = [p.convert("RGB") for p in pages]
    first.save(buffer, "PDF", resolution=float(dpi), save_all=True, append_images=rest)
    return buffer.getvalue()


def mixed_pdf(text_page: str, scan, picture=None) -> bytes:  # noqa: ANN001
    """Page 1: a text layer (with `picture` drawn under the text, if given); page 2: a scan."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    c = canvas.Canvas(buffer, pagesize=A4)
    width, height = A4
    c.setFont("Helvetica", 12)
    c.drawString(72, height - 72, text_page)
    if picture is not None:
        c.drawImage(ImageReader(picture), 72, height - 140 - picture.height * 72 / 150,
                    width=picture.width * 72 / 150, height=picture.height * 72 / 150)
    c.showPage()
    c.drawImage(ImageReader(scan), 0, 0, width=width, height=height)
    c.showPage()
    c.save()
    return buffer.getvalue()


def docx_with_picture(before: str, picture, after: str) -> bytes:  # noqa: ANN001
    import docx
    from docx.shared import Inches

    document = docx.Document()
    document.add_heading("Service notes", level=1)
    document.add_paragraph(before)
    document.add_picture(io.BytesIO(image_bytes(picture)), width=Inches(6))
    document.add_paragraph(after)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def pptx_with_picture(titles: list[str], picture, on_slide: int) -> bytes:  # noqa: ANN001
    import pptx
    from pptx.util import Inches

    presentation = pptx.Presentation()
    for number, title in enumerate(titles, start=1):
        slide = presentation.slides.add_slide(presentation.slide_layouts[5])  # title only
        slide.shapes.title.text = title
        if number == on_slide:
            slide.shapes.add_picture(io.BytesIO(image_bytes(picture)), Inches(0.5), Inches(2), width=Inches(9))
    buffer = io.BytesIO()
    presentation.save(buffer)
    return buffer.getvalue()
