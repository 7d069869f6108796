"""Local, offline OCR: pictures → headings, paragraphs and tables in reading order (the layout
from the boxes' geometry: ocr_layout.py).

The engine is RapidOCR (PP-OCRv6 small detection and recognition models for Chinese + English,
run on onnxruntime); its wheel ships the models, so nothing is downloaded at run time.
docs/DESIGN.md → "OCR" says why this engine. Every caller runs in a parse worker process
(ingestion/isolation.py); one recognition runs at a time per process, which bounds memory, and
the models load once per worker.

    open_image(data, label) -> PIL image   (size limits checked before the pixels are decoded)
    recognise(image) -> OcrText             (its blocks, and their text with tables in Markdown)
    OcrTally: what the console shows about a file's OCR (pages, confidence, pages with nothing)
"""

from __future__ import annotations

import io
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lucidrag.base import limits
from lucidrag.base.errors import LimitExceeded, ParseError

from ._common import render_table
from .ocr_layout import Block, OcrLine, page_lines, read_page

if TYPE_CHECKING:
    from PIL import Image

logger = logging.getLogger(__name__)

_ENGINE_LOCK = threading.Lock()  # loading the models and running them: one at a time
_engine: Any = None

# PP-OCR crops each line to 48 px high: pictures smaller than this hold no readable line.
_MIN_SIDE = 12
# The detector sees the picture scaled so that its longer side is DET_SIDE px (RapidOCR's default,
# shorter side >= 736, blows a wide strip up 2-4x and took 3-5 s; docs/BENCHMARKS.md → "OCR").
DET_SIDE = 960
# Below this mean confidence a page is read again upside down and the better reading kept.
# RapidOCR's per-line 0/180° classifier is off: it flipped whole lines of upright English.
FLIP_BELOW = 0.8
_SENTENCE_END = ".!?。！？:：;；"


@dataclass(frozen=True)
class OcrText:
    """The text found in one picture or page: its blocks in reading order (headings, paragraphs,
    tables) and, as `text`, the same joined by blank lines with tables in Markdown."""

    text: str
    confidence: float | None  # mean recognition score of the lines (0-1); None when none found
    lines: int
    blocks: tuple[Block, ...] = ()


def _load_engine() -> Any:
    global _engine
    if _engine is None:
        try:
            from rapidocr import RapidOCR
        except ImportError as exc:  # a broken install: say so rather than "damaged file"
            raise ParseError("The OCR engine (rapidocr + onnxruntime) is not installed in the plugin's "
                             "environment, so scans and pictures cannot be read. Reinstall LucidRAG.") from exc
        threads = max(1, min(4, os.cpu_count() or 1))
        _engine = RapidOCR(params={
            "Global.log_level": "error",
            "Global.use_cls": False,
            "Det.limit_type": "max",
            "Det.limit_side_len": DET_SIDE,
            "EngineConfig.onnxruntime.intra_op_num_threads": threads,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        })
    return _engine


def open_image(data: bytes, label: str):  # noqa: ANN201 - PIL.Image.Image
    """Open picture bytes lazily and check their size before any pixel is decoded."""
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError:
        raise _too_many_pixels(label) from None
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise ParseError(f"This {label} picture is damaged or in a format Pillow cannot read "
                         f"({type(exc).__name__}). Save it again as PNG or JPEG, then upload it.") from None
    check_pixels(image, label)
    return image


# Scaling a picture with transparency makes a second full-size copy (premultiplied alpha)
_ALPHA_MODES = frozenset({"RGBA", "LA", "PA", "RGBa", "La"})


def pixel_limit(mode: str) -> int:
    return limits.MAX_IMAGE_PIXELS // 2 if mode in _ALPHA_MODES else limits.MAX_IMAGE_PIXELS


def check_pixels(image: Image.Image, label: str) -> None:
    """Before any pixel is decoded (the header gives size and mode)."""
    width, height = image.size
    if width * height > pixel_limit(image.mode):
        alpha = ", with transparency" if image.mode in _ALPHA_MODES else ""
        raise _too_many_pixels(label, f" ({width:,} × {height:,}{alpha})")


def _too_many_pixels(label: str, size: str = "") -> LimitExceeded:
    return LimitExceeded(
        f"This {label} picture is too large to read{size}: LucidRAG reads pictures up to "
        f"{limits.MAX_IMAGE_PIXELS // 1_000_000} megapixels, {limits.MAX_IMAGE_PIXELS // 2_000_000} with "
        "transparency (MAX_IMAGE_PIXELS). Scale it down or crop it, then upload it again.")


def recognise(image: Image.Image) -> OcrText:
    """Text in a picture, paragraphs in reading order. A sideways picture (most text in boxes
    taller than wide) is turned a quarter; a reading with low confidence is tried upside down."""
    import numpy as np

    image = _upright(image)
    if min(image.size) < _MIN_SIDE:
        return OcrText("", None, 0)
    if max(image.size) > limits.OCR_MAX_SIDE:  # more pixels only slow the detector down
        image.thumbnail((limits.OCR_MAX_SIDE, limits.OCR_MAX_SIDE))  # (replaces _upright's pixels only)
    image = _rgb(image)
    pixels = np.asarray(image)[:, :, ::-1]  # RapidOCR takes OpenCV's BGR order
    with _ENGINE_LOCK:
        engine = _load_engine()
        lines = _lines(engine(pixels))
        if _sideways(lines):
            pixels = np.ascontiguousarray(np.rot90(pixels, k=-1))
            lines = _lines(engine(pixels))
        if lines and _confidence(lines) < FLIP_BELOW:
            flipped = _lines(engine(np.ascontiguousarray(pixels[::-1, ::-1])))
            if _confidence(flipped) > _confidence(lines):
                lines = flipped
    if not lines:
        return OcrText("", None, 0)
    blocks = tuple(read_page(lines))
    return OcrText(blocks_text(blocks), _confidence(lines), len(lines), blocks)


def _upright(image: Image.Image) -> Image.Image:
    """The picture decoded and turned as its EXIF orientation says (ImageOps.exif_transpose),
    without the full-size copy exif_transpose makes of a picture that needs no turn (240 MB for a
    60 MP RGBA PNG): a new Image object over the same decoded pixels, which thumbnail() replaces,
    not the caller's. A JPEG over twice OCR_MAX_SIDE is decoded at a reduced scale (a 48 MP photo
    as 12 MP)."""
    from PIL import ExifTags, ImageOps

    if image.format == "JPEG" and getattr(image, "tile", None):  # not decoded yet: decode it at 1/2-1/8
        image.draft(None, (limits.OCR_MAX_SIDE, limits.OCR_MAX_SIDE))  # scale, still ≥ what OCR reads
    image.load()
    if image.getexif().get(ExifTags.Base.Orientation, 1) in range(2, 9):
        return ImageOps.exif_transpose(image)
    return image._new(image.im)  # noqa: SLF001 - Image.copy() without copying the pixels


def blocks_text(blocks: tuple[Block, ...] | list[Block]) -> str:
    """Blocks as plain text: paragraphs and headings separated by blank lines, tables in Markdown."""
    return "\n\n".join(render_table(list(b.rows)) if b.kind == "table" else b.text for b in blocks)


def _confidence(lines: list[OcrLine]) -> float:
    """Mean line score weighted by characters (a long garbled line weighs more than a page number)."""
    chars = sum(len(line.text) for line in lines)
    return sum(len(line.text) * line.score for line in lines) / chars if chars else 0.0


def _rgb(image: Image.Image) -> Image.Image:
    """RGB on a white background (transparent screenshots and logos would turn black)."""
    from PIL import Image

    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGB", rgba.size, "white")
        background.paste(rgba, mask=rgba.getchannel("A"))
        return background
    return image.convert("RGB")


def _lines(result: Any) -> list[OcrLine]:
    boxes, txts, scores = getattr(result, "boxes", None), getattr(result, "txts", None), \
        getattr(result, "scores", None)
    if boxes is None or not txts:
        return []
    return page_lines(list(boxes), list(txts), list(scores))


def _sideways(lines: list[OcrLine]) -> bool:
    """Most of the text (by characters) sits in boxes much taller than wide: the page is turned."""
    tall = sum(len(line.text) for line in lines
               if line.height > 1.5 * (line.box[2] - line.box[0]) and len(line.text) > 2)
    total = sum(len(line.text) for line in lines)
    return total > 0 and tall > total / 2


@dataclass
class OcrTally:
    """What OCR did for one file, for the console: pages read by OCR, pages where it found no
    text, pictures read, pictures skipped past the per-file limit, and the mean confidence."""

    pages: list[int] = field(default_factory=list)
    empty_pages: list[int] = field(default_factory=list)
    pictures: int = 0
    pictures_skipped: int = 0
    _scores: list[tuple[float, int]] = field(default_factory=list)
    _vision: int = 0

    def page(self, number: int, found: OcrText) -> None:
        self.pages.append(number)
        if found.text:
            self._scores.append((found.confidence or 0.0, found.lines))
        else:
            self.empty_pages.append(number)

    def picture(self, found: OcrText) -> None:
        self.pictures += 1
        if found.text:
            self._scores.append((found.confidence or 0.0, found.lines))

    def vision_png(self, image: Image.Image) -> bytes | None:
        """The picture as a PNG of at most limits.VISION_MAX_SIDE px for the vision model; None
        for small pictures and past limits.MAX_VISION_PICTURES."""
        from PIL import ImageOps

        if min(image.size) < limits.VISION_MIN_SIDE or self._vision >= limits.MAX_VISION_PICTURES:
            return None
        self._vision += 1
        picture = _rgb(ImageOps.exif_transpose(image))
        picture.thumbnail((limits.VISION_MAX_SIDE, limits.VISION_MAX_SIDE))
        buffer = io.BytesIO()
        picture.save(buffer, "PNG", optimize=True)
        return buffer.getvalue()

    def take_picture(self) -> bool:
        """Whether one more embedded picture may be read (limits.MAX_PICTURES_PER_FILE)."""
        if self.pictures >= limits.MAX_PICTURES_PER_FILE:
            self.pictures_skipped += 1
            return False
        return True

    def metadata(self) -> dict[str, str | int]:
        """Document.metadata entries (empty when OCR did nothing for the file)."""
        if not self.pages and not self.pictures and not self.pictures_skipped:
            return {}
        out: dict[str, str | int] = {}
        if self.pages:
            out["ocr_pages"] = page_ranges(self.pages)
        if self.empty_pages:
            out["ocr_empty_pages"] = page_ranges(self.empty_pages)
        if self.pictures:
            out["ocr_pictures"] = self.pictures
        if self.pictures_skipped:
            out["ocr_pictures_skipped"] = self.pictures_skipped
        if self._scores:
            weight = sum(n for _, n in self._scores)
            out["ocr_confidence"] = round(100 * sum(s * n for s, n in self._scores) / weight)
        return out


def page_ranges(numbers: list[int]) -> str:
    """[1, 2, 3, 5] → "1-3, 5"."""
    spans: list[list[int]] = []
    for n in sorted(set(numbers)):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in spans)


TITLE_MAX_CHARS = 60
TITLE_MAX_WORDS = 10


def title_from(text: str) -> str:
    """A scan's or picture's first line when it reads like a title: short, no sentence or clause
    end, a few letters (not OCR noise such as "|||" or a page number). What the operator sees
    instead of "IMAGE file, <time>" (document.document_name)."""
    first = text.strip().split("\n", 1)[0].strip()
    if not 0 < len(first) <= TITLE_MAX_CHARS or first[-1] in _SENTENCE_END + ",，、":
        return ""
    if len(first.split()) > TITLE_MAX_WORDS or sum(ch.isalpha() for ch in first) < 2:
        return ""
    return first


PICTURE_MARK = "[Picture text]"


def picture_text(text: str) -> str:
    """Text read from a picture inside a document, marked so that a reader (and the LLM) knows
    it came from a picture."""
    return f"{PICTURE_MARK}\n{text}"


@dataclass(frozen=True)
class PictureRead:
    """A picture inside a document: its OCR text and its tables (Markdown, placed after the text
    like a document's own tables), or (no text found) the picture itself as a small PNG for the
    optional vision model (None past limits.MAX_VISION_PICTURES)."""

    text: str = ""
    png: bytes | None = None
    tables: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        return bool(self.text or self.tables or self.png)


def read_picture(blob: bytes, tally: OcrTally) -> PictureRead:
    """OCR of a picture embedded in a document. Pictures too small to hold a line, past the
    per-file count, too large or unreadable give nothing (a bad picture never fails its document)."""
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(blob))
        width, height = image.size
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, ValueError):
        return PictureRead()  # EMF/WMF/SVG and damaged pictures
    if width * height < limits.OCR_MIN_PICTURE_PIXELS or width * height > pixel_limit(image.mode):
        return PictureRead()
    return read_image(image, tally)


def read_image(image: Image.Image, tally: OcrTally) -> PictureRead:
    if not tally.take_picture():
        return PictureRead()
    try:
        found = recognise(image)
        tally.picture(found)
        if found.text:
            return PictureRead(text=blocks_text([b for b in found.blocks if b.kind != "table"]),
                               tables=tuple(render_table(list(b.rows)) for b in found.blocks if b.kind == "table"))
        return PictureRead(png=tally.vision_png(image))
    except (OSError, ValueError) as exc:  # truncated picture data
        logger.info("picture skipped: %s", type(exc).__name__)
        return PictureRead()
