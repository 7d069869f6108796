"""Pictures of text rendered at test time (Pillow + a CJK font, tests/cjk_font.py; .ci/run installs
Debian's fonts-wqy-microhei), and the scans, office files and mixed PDFs built from them. Also used
by bench/bench_ocr.py, so the benchmark and the tests read the same kind of page."""

from __future__ import annotations

import io
import random

from tests.cjk_font import NO_CJK_FONT, chinese_face, cjk_font


def render(paragraphs: list[str], *, dpi: int = 150, width_in: float = 8.27, point: float = 12,
           height_in: float | None = None):  # noqa: ANN201 - PIL.Image.Image
    """A white page with `paragraphs` in black at `point` size, wrapped to the page width, a blank
    line between paragraphs: what a scanner makes of a printed page at `dpi`."""
    from PIL import Image, ImageDraw, ImageFont

    path = cjk_font()
    assert path is not None, NO_CJK_FONT
    font = ImageFont.truetype(str(path), round(point * dpi / 72), index=chinese_face(path))
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


class Sheet:
    """A page laid out by hand, for pages that `render` cannot make: columns, side bars, tables,
    forms. Positions and widths are in inches from the top left; text wraps inside its width.

        sheet = Sheet(dpi=150)
        y = sheet.text(0.8, 0.8, 6.6, ["Title"], point=20)
        sheet.text(0.8, y, 3.1, left_column); sheet.text(4.3, y, 3.1, right_column)
        sheet.image  # the page
    """

    def __init__(self, *, dpi: int = 150, width_in: float = 8.27, height_in: float = 11.69) -> None:
        from PIL import Image, ImageDraw

        path = cjk_font()
        assert path is not None, NO_CJK_FONT
        self._font_path = path
        self.dpi = dpi
        self.image = Image.new("RGB", (round(width_in * dpi), round(height_in * dpi)), "white")
        self._draw = ImageDraw.Draw(self.image)

    def _font(self, point: float):  # noqa: ANN202 - PIL FreeTypeFont
        from PIL import ImageFont

        size = round(point * self.dpi / 72)
        return ImageFont.truetype(str(self._font_path), size, index=chinese_face(self._font_path))

    def text(self, x: float, y: float, width: float, paragraphs: list[str], *, point: float = 12) -> float:
        """Paragraphs wrapped to `width`, a blank line between them; returns the y below them."""
        font = self._font(point)
        line_height = point / 72 * 1.5
        for paragraph in paragraphs:
            for line in _wrap(paragraph, font, width * self.dpi, self._draw):
                self._draw.text((x * self.dpi, y * self.dpi), line, font=font, fill="black")
                y += line_height
            y += line_height
        return y

    def table(self, x: float, y: float, rows: list[list[str]], widths: list[float], *, point: float = 11,
              ruled: bool = True) -> float:
        """A table with the given column widths: cell text left aligned, with or without rules;
        returns the y below it."""
        font = self._font(point)
        row_height = point / 72 * 2.1
        pad = point / 72 * 0.4
        edges = [x]
        for width in widths:
            edges.append(edges[-1] + width)
        top = y
        for row in rows:
            for column, cell in enumerate(row):
                self._draw.text(((edges[column] + pad) * self.dpi, (y + pad) * self.dpi), cell, font=font,
                                fill="black")
            y += row_height
        if ruled:
            px = self.dpi
            for k in range(len(rows) + 1):
                line_y = (top + k * row_height) * px
                self._draw.line((edges[0] * px, line_y, edges[-1] * px, line_y), fill="black", width=2)
            for edge in edges:
                self._draw.line((edge * px, top * px, edge * px, y * px), fill="black", width=2)
        return y + row_height * 0.5


def _wrap(paragraph: str, font, width_px: float, draw) -> list[str]:  # noqa: ANN001
    lines: list[str] = []
    current = ""
    for token in _tokens(paragraph):
        trial = current + token
        if current and draw.textlength(trial.rstrip(), font=font) > width_px:
            lines.append(current.rstrip())
            current = token.lstrip()
        else:
            current = trial
    lines.append(current.rstrip())
    return lines


# ---------------------------------------------------------------------------------------------
# Laid-out pages: each kind with the sentences (or rows) a reader takes from it, in reading order.
# The tests assert on them and bench/bench_ocr.py counts how many come back intact and in order.

BULLETIN_TITLE = "Building services bulletin"
BULLETIN_LEFT = [
    "Maintenance schedule",
    "The east stairwell is closed for painting until the end of the month.",
    "Use the west stairwell or the lifts while the work goes on.",
]
BULLETIN_RIGHT = [
    "Power tests",
    "The emergency generator is tested every first Monday at seven.",
    "Lights in the car park may flicker for a few minutes during the test.",
]


def two_columns(title: str, left: list[str], right: list[str], *, dpi: int = 150, point: float = 12,
                title_point: float = 20):  # noqa: ANN201 - PIL.Image.Image
    """A page with a title across the top and two columns of paragraphs under it."""
    sheet = Sheet(dpi=dpi, height_in=4.2)
    y = sheet.text(0.8, 0.7, 6.6, [title], point=title_point)
    sheet.text(0.8, y, 3.1, left, point=point)
    sheet.text(4.4, y, 3.1, right, point=point)
    return sheet.image


NOTICE_ZH_TITLE = "售后服务说明"
NOTICE_ZH_LEFT = [
    "保修范围",
    "型号KX-2290的整机保修期为两年，压缩机保修五年。",
    "保修期内的上门维修不收取人工费。",
]
NOTICE_ZH_RIGHT = [
    "联系方式",
    "请拨打服务热线4008-123-456预约维修。",
    "周末和法定节假日照常提供服务。",
]

PRICE_ROWS = [
    ["Item", "Code", "Unit", "Price (EUR)"],
    ["Brass elbow 22 mm", "BE-22", "piece", "3.10"],
    ["Kestrel valve", "KV-405", "piece", "41.70"],
    ["Copper pipe 15 mm", "CP-15", "metre", "6.25"],
    ["Sealing tape", "ST-12", "roll", "1.95"],
]
PRICE_WIDTHS = [2.6, 1.3, 1.0, 1.5]


def table_page(rows: list[list[str]], widths: list[float], *, title: str = "Spare parts price list",
               ruled: bool = True, dpi: int = 150, note: str = ""):  # noqa: ANN201
    """A title, an optional sentence, and a table under it."""
    sheet = Sheet(dpi=dpi, height_in=4.6)
    y = sheet.text(0.8, 0.6, 6.6, [title], point=18)
    if note:
        y = sheet.text(0.8, y, 6.6, [note])
    sheet.table(0.8, y, rows, widths, ruled=ruled)
    return sheet.image


FORM_FIELDS = [("Name", "Maria Lopez"), ("Account", "AC-7731"), ("Phone", "555 0142"), ("City", "Porto")]


def form_page(dpi: int = 150):  # noqa: ANN201
    """A filled-in form: a title, then label / value pairs in two columns of fields."""
    sheet = Sheet(dpi=dpi, height_in=3.6)
    sheet.text(0.8, 0.6, 6.6, ["Service request form"], point=18)
    for k, (label, value) in enumerate(FORM_FIELDS):
        x = 0.8 if k % 2 == 0 else 4.4
        y = 1.5 + (k // 2) * 0.6
        sheet.text(x, y, 1.2, [label + ":"])
        sheet.text(x + 1.2, y, 2.0, [value])
    return sheet.image


SIDEBAR_MAIN = [
    "Visitor parking",
    "Visitors park on level two of the north garage and show the ticket at the front desk.",
    "The garage closes at ten in the evening on weekdays.",
]
SIDEBAR_BOX = ["Note", "Bicycles go in the yard behind the canteen."]
CAPTION = "Figure 1. Garage entrance on Mill Road."


def sidebar_page(dpi: int = 150):  # noqa: ANN201
    """A wide main column with a picture and its caption, and a framed side bar on the right."""
    sheet = Sheet(dpi=dpi, height_in=6.0)
    y = sheet.text(0.8, 0.7, 4.4, SIDEBAR_MAIN)
    px = dpi
    sheet._draw.rectangle((0.8 * px, y * px, 4.6 * px, (y + 1.3) * px), fill=(150, 150, 150))
    sheet.text(0.8, y + 1.45, 4.4, [CAPTION], point=10)
    sheet._draw.rectangle((5.6 * px, 0.6 * px, 7.6 * px, 2.7 * px), outline="black", width=2)
    sheet.text(5.75, 0.75, 1.75, SIDEBAR_BOX, point=11)
    return sheet.image


NEWSLETTER_TITLE = "Quarterly newsletter"
NEWSLETTER_COLUMNS = [
    ["Sales rose by four percent in the north region this quarter.", "The south region was flat."],
    ["Two new stores opened in Leeds and in Hull during March.", "Both stores open at eight."],
    ["The staff party is on the last Friday of June in the canteen.", "Bring your own cup."],
]
NEWSLETTER_FOOTER = "Printed by the internal communications team, page 1"


def newsletter_page(dpi: int = 150):  # noqa: ANN201
    """Three columns with gutters so narrow that the detector runs lines across them, and a
    footer under the first two."""
    sheet = Sheet(dpi=dpi, height_in=5.0)
    y = sheet.text(0.6, 0.5, 7, [NEWSLETTER_TITLE], point=20)
    for k, column in enumerate(NEWSLETTER_COLUMNS):
        sheet.text(0.6 + k * 2.4, y, 2.2, column, point=11)
    sheet.text(0.6, 4.3, 7, [NEWSLETTER_FOOTER], point=9)
    return sheet.image


MIXED_ZH = [
    "设备清单",
    "冷却塔由Siemens公司提供，型号为SX-3300，安装在三号楼屋顶。",
    "控制柜使用Schneider Electric的PLC模块，编号PLC-77A。",
]

CONTINUED_ROWS_1 = [
    ["Room", "Owner", "Extension"],
    ["A101", "Finance", "4410"],
    ["A102", "Legal", "4420"],
    ["A103", "Payroll", "4430"],
]
CONTINUED_ROWS_2 = [
    ["B201", "Archive", "4510"],
    ["B202", "Mailroom", "4520"],
    ["B203", "Security", "4530"],
]
CONTINUED_WIDTHS = [1.6, 2.4, 1.6]


def continued_table_pages(dpi: int = 150) -> list:
    """Two scanned pages: a table under a title, continued on the next page without its header."""
    first = Sheet(dpi=dpi, height_in=3.6)
    y = first.text(0.8, 0.6, 6.6, ["Office directory"], point=18)
    first.table(0.8, y, CONTINUED_ROWS_1, CONTINUED_WIDTHS)
    second = Sheet(dpi=dpi, height_in=3.0)
    second.table(0.8, 0.6, CONTINUED_ROWS_2, CONTINUED_WIDTHS)
    return [first.image, second.image]


def _rows_md(rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(row) + " |" for row in rows]


def layout_samples() -> list[tuple[str, list, list[str]]]:
    """(kind, pages, what a reader takes from them in order: sentences, and table rows as Markdown
    rows) for each kind of laid-out page; bench/bench_ocr.py --layout reads them all."""
    bulletin = [BULLETIN_TITLE] + BULLETIN_LEFT + BULLETIN_RIGHT
    columns = two_columns(BULLETIN_TITLE, BULLETIN_LEFT, BULLETIN_RIGHT)
    price = [PRICE_ROWS[0]] + PRICE_ROWS[1:]
    return [
        ("two columns EN", [columns], bulletin),
        ("two columns ZH", [two_columns(NOTICE_ZH_TITLE, NOTICE_ZH_LEFT, NOTICE_ZH_RIGHT)],
         [NOTICE_ZH_TITLE] + NOTICE_ZH_LEFT + NOTICE_ZH_RIGHT),
        ("table, ruled", [table_page(PRICE_ROWS, PRICE_WIDTHS)], ["Spare parts price list"] + _rows_md(price)),
        ("table, no rules", [table_page(PRICE_ROWS, PRICE_WIDTHS, ruled=False)],
         ["Spare parts price list"] + _rows_md(price)),
        ("form", [form_page()], ["Service request form"] + [f"{k}: {v}" for k, v in FORM_FIELDS]),
        ("side bar + caption", [sidebar_page()], SIDEBAR_MAIN + [CAPTION] + SIDEBAR_BOX),
        ("three narrow columns + footer", [newsletter_page()],
         [NEWSLETTER_TITLE] + [p for column in NEWSLETTER_COLUMNS for p in column] + [NEWSLETTER_FOOTER]),
        ("mixed scripts", [render(MIXED_ZH)], MIXED_ZH),
        ("photo, tilted", [photo_like(columns)], bulletin),
        ("sideways scan", [columns.rotate(90, expand=True)], bulletin),
        ("low resolution (80 dpi)", [two_columns(BULLETIN_TITLE, BULLETIN_LEFT, BULLETIN_RIGHT, dpi=80)], bulletin),
        ("table over two pages", continued_table_pages(),
         ["Office directory"] + _rows_md(CONTINUED_ROWS_1 + CONTINUED_ROWS_2)),
    ]
