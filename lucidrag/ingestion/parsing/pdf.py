"""PDF: pypdfium2 (text per page, outline → heading paths), pypdf when pdfium cannot open it;
OCR for pages without a text layer and for pictures on the others."""

from __future__ import annotations

import io
import logging
import re
import threading
from dataclasses import dataclass

from lucidrag.base import limits
from lucidrag.base.errors import LimitExceeded, ParseError
from lucidrag.ingestion.document import Document, Section

from ._common import PICTURE_PLACEHOLDER, HeadingStack, clean_inline, clean_text, is_cjk, normalize_newlines
from .ocr import OcrTally, OcrText, PictureRead, picture_text, read_image, recognise, title_from
from .ocr_sections import OcrSections
from .pdfcontent import check_pdf_content

logger = logging.getLogger(__name__)

# PDFium is not thread-safe: one document at a time per process.
_PDFIUM_LOCK = threading.Lock()

ENCRYPTED = "This PDF is encrypted/password-protected. Remove the password and upload it again."
SCANNED = (
    "No text found in this PDF, not even by OCR on its scanned pages. If it holds text, scan it "
    "again at 200-300 dpi (or export it as a text PDF), then upload it."
)


def _damaged(detail: str) -> ParseError:
    detail = " ".join(str(detail).split())[:160] or "unreadable"
    return ParseError(f"This PDF is damaged or truncated ({detail}). Re-export it and upload again.")


# ---------------------------------------------------------------------------------------------
# Line joining

_TERMINAL = ".!?。！？…:：»”」』)）"
_LIST_MARKER = re.compile(r"^\s*(?:[-•·▪◦●○■□*–—]|\(?\d{1,3}[.)、]|\(?[a-zA-Z][.)]\s|[一二三四五六七八九十]+[、.]|第.{1,6}[章节条])")
_HYPHEN_BREAK = re.compile(r"[\u00ad\x02\ufffe]\n")


_WIDE = re.compile(
    "[\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60"
    "\uffe0-\uffe6\U00020000-\U0003fffd]"
)


def _width(line: str) -> int:
    """Display width: CJK and full-width characters count double."""
    return len(line) if line.isascii() else len(line) + len(_WIDE.findall(line))


def join_lines(text: str) -> str:
    """Undo the hard line wraps a PDF text layer has inside paragraphs.

    A break is soft (joined) when the line before does not end a sentence, the next line is not a
    list item, and the line is long (≥ 60% of the page's typical line and not heading-short) or
    the next line starts with a lowercase letter. Between two CJK characters a soft break is removed; in Latin text it
    becomes a space, and a word hyphenated across the break is re-joined."""
    text = _HYPHEN_BREAK.sub("", normalize_newlines(text))
    lines = [line.rstrip() for line in text.split("\n")]
    lengths = sorted(_width(line.strip()) for line in lines if line.strip())
    if not lengths:
        return ""
    typical = lengths[int(len(lengths) * 0.75)] if len(lengths) >= 4 else lengths[-1]
    out: list[str] = [lines[0]]
    for line in lines[1:]:
        prev = out[-1]
        stripped = line.strip()
        if not prev.strip() or not stripped or _LIST_MARKER.match(line):
            out.append(line)
            continue
        last, first = prev[-1], stripped[0]
        width = _width(prev.strip())
        long_line = width >= 0.6 * typical and width >= 30
        soft = last not in _TERMINAL and (long_line or first.islower() or last in ",，、;；")
        if not soft:
            out.append(line)
        elif is_cjk(last) and is_cjk(first):
            out[-1] = prev + stripped
        elif last == "-" and len(prev) >= 2 and prev[-2].isalpha() and first.islower():
            out[-1] = prev[:-1] + stripped
        else:
            out[-1] = prev + " " + stripped
    return "\n".join(out)


def _only_noise(text: str) -> bool:
    """True when a page's text is nothing but page numbers, punctuation and whitespace."""
    return not any(ch.isalpha() for ch in text)


# ---------------------------------------------------------------------------------------------
# Outline


@dataclass(frozen=True)
class _Bookmark:
    level: int
    title: str
    page_index: int


def _split_page(
    text: str, bookmarks: list[_Bookmark], stack: HeadingStack, page: int, out: list[Section]
) -> None:
    """Emit a page's text as sections, switching heading path where a bookmark title appears."""
    cursor = 0
    for bm in bookmarks:
        at = _find_title(text, bm.title, cursor)
        if at is not None:
            start, end = at
            _emit(text[cursor:start], stack.path, page, out)
            cursor = end
        stack.push(bm.level, bm.title)
    _emit(text[cursor:], stack.path, page, out)


def _find_title(text: str, title: str, start: int) -> tuple[int, int] | None:
    if not title:
        return None
    at = text.find(title, start)
    if at >= 0:
        return at, at + len(title)
    # Titles often differ from the page text in whitespace only.
    pattern = r"\s*".join(re.escape(ch) for ch in title.replace(" ", ""))
    if len(pattern) > 2000:
        return None
    match = re.compile(pattern).search(text, start)
    return (match.start(), match.end()) if match else None


def _emit(text: str, headings: tuple[str, ...], page: int, out: list[Section]) -> None:
    text = clean_text(text).strip()
    if text:
        out.append(Section(text=text, headings=headings, page=page))


def _sections(pages: list[str], bookmarks: list[_Bookmark],
              pictures: dict[int, list[PictureRead]] | None = None,
              scanned: dict[int, OcrText] | None = None) -> list[Section]:
    """Sections page by page: a text layer split at its bookmarks' titles; a scanned page's OCR
    blocks (its headings, paragraphs and tables); then the page's pictures."""
    pictures, scanned = pictures or {}, scanned or {}
    if all(_only_noise(p) for p in pages) and not pictures:
        raise ParseError(SCANNED)
    by_page: dict[int, list[_Bookmark]] = {}
    for bm in bookmarks:
        if 0 <= bm.page_index < len(pages):
            by_page.setdefault(bm.page_index, []).append(bm)
    stack = HeadingStack()
    ocr = OcrSections(stack)
    out: list[Section] = []
    for index, raw in enumerate(pages):
        if index in scanned:
            for bm in by_page.get(index, []):
                stack.push(bm.level, bm.title)
            out.extend(ocr.page(scanned[index].blocks, index + 1))
        else:
            _split_page(join_lines(raw), by_page.get(index, []), stack, index + 1, out)
        for picture in pictures.get(index, ()):
            if picture.text:
                _emit(picture_text(picture.text), stack.path, index + 1, out)
            out.extend(Section(text=table, headings=stack.path, page=index + 1, is_table=True)
                       for table in picture.tables)
            if picture.png:
                out.append(Section(text=PICTURE_PLACEHOLDER, headings=stack.path, page=index + 1,
                                   picture=picture.png))
    return out


# ---------------------------------------------------------------------------------------------
# Back ends


def parse_pdf(data: bytes, ext: str = ".pdf") -> Document:
    check_pdf_content(data)
    try:
        pages, bookmarks = _read_pdfium(data)
        engine = "pypdfium2"
    except _Encrypted:
        raise ParseError(ENCRYPTED) from None
    except _PdfiumFailed as exc:
        logger.info("pypdfium2 could not open the PDF (%s); trying pypdf", exc.reason)
        pages, bookmarks = _read_pypdf(data, exc.reason)
        engine = "pypdf"
    tally = OcrTally()
    pictures: dict[int, list[PictureRead]] = {}
    scanned: dict[int, OcrText] = {}
    if engine == "pypdfium2":
        pictures = _ocr_pages(data, pages, tally, scanned)
    sections = _sections(pages, bookmarks, pictures, scanned)
    metadata: dict[str, str | int] = {"page_count": len(pages), "pdf_engine": engine}
    metadata.update(tally.metadata())
    title = _pdf_title(data) or (title_from(pages[0]) if tally.pages[:1] == [1] else "")
    return Document(sections=tuple(sections), format="pdf", metadata=metadata, title=title)


# ---------------------------------------------------------------------------------------------
# OCR: pages without a text layer are rendered and read; pictures on pages with text are read
# one by one and placed after that page's text, marked as picture text.


def _ocr_pages(data: bytes, pages: list[str], tally: OcrTally,
               scanned: dict[int, OcrText]) -> dict[int, list[PictureRead]]:
    """Fill `pages[i]` (and `scanned[i]`, the OCR reading) for pages without usable text; return
    the text of pictures on the others."""
    import pypdfium2 as pdfium

    without_text = sum(1 for text in pages if _only_noise(text))
    if without_text > limits.MAX_OCR_PAGES:
        raise LimitExceeded(
            f"This PDF has {without_text:,} scanned pages (pages without a text layer); LucidRAG reads "
            f"at most {limits.MAX_OCR_PAGES} scanned pages per file by OCR (MAX_OCR_PAGES). Split it "
            "into smaller PDFs and upload them separately.")
    pictures: dict[int, list[PictureRead]] = {}
    with _PDFIUM_LOCK:
        pdf = pdfium.PdfDocument(data)
    try:
        for index in range(len(pages)):
            is_scanned = _only_noise(pages[index])
            with _PDFIUM_LOCK:  # PDFium calls are serialised; OCR runs outside the lock
                images = _page_images(pdf, index, is_scanned, tally)
            for image in images:
                if is_scanned:
                    found = recognise(image)
                    tally.page(index + 1, found)
                    pages[index] = found.text
                    scanned[index] = found
                else:
                    picture = read_image(image, tally)
                    if picture.found:
                        pictures.setdefault(index, []).append(picture)
    finally:
        with _PDFIUM_LOCK:
            pdf.close()
    return pictures


def _page_images(pdf, index: int, scanned: bool, tally: OcrTally) -> list:  # noqa: ANN001
    """The whole page rendered (a scanned page), or the readable pictures on a page with text."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    try:
        page = pdf[index]
    except pdfium.PdfiumError:
        return []
    try:
        if scanned:
            width, height = page.get_size()
            scale = limits.OCR_DPI / 72
            pixels = width * height * scale * scale
            if pixels > limits.MAX_IMAGE_PIXELS:  # a poster-sized page: render it at the size OCR reads
                scale = limits.OCR_MAX_SIDE / max(width, height)
            return [page.render(scale=scale).to_pil()]
        page_area = max(1.0, page.get_width() * page.get_height())
        images = []
        for obj in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,), max_depth=3):
            left, bottom, right, top = obj.get_bounds()
            if (right - left) * (top - bottom) > page_area / 2:
                continue  # a page-sized picture under a text layer: a scan already OCRed
            px_width, px_height = obj.get_px_size()
            if px_width * px_height < limits.OCR_MIN_PICTURE_PIXELS or px_width * px_height > limits.MAX_IMAGE_PIXELS:
                continue
            if tally.pictures + len(images) >= limits.MAX_PICTURES_PER_FILE:
                tally.pictures_skipped += 1  # not decoded at all
                continue
            try:
                images.append(obj.get_bitmap(render=True).to_pil())
            except pdfium.PdfiumError:
                logger.info("PDF page %d: a picture could not be decoded", index + 1)
        return images
    except pdfium.PdfiumError:
        logger.info("PDF page %d could not be rendered for OCR", index + 1)
        return []
    finally:
        page.close()


def _pdf_title(data: bytes) -> str:
    """The Info dictionary's /Title (document_name); a bonus, never a reason to fail."""
    try:
        from pypdf import PdfReader

        info = PdfReader(io.BytesIO(data)).metadata
        return str(info.title or "") if info is not None else ""
    except Exception:  # noqa: BLE001
        return ""


class _Encrypted(Exception):
    pass


class _PdfiumFailed(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _read_pdfium(data: bytes) -> tuple[list[str], list[_Bookmark]]:
    with _PDFIUM_LOCK:
        return _read_pdfium_locked(data)


def _read_pdfium_locked(data: bytes) -> tuple[list[str], list[_Bookmark]]:
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if exc.err_code in (pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY):
            raise _Encrypted() from None
        reason = {
            pdfium_c.FPDF_ERR_FORMAT: "not a PDF or corrupted",
            pdfium_c.FPDF_ERR_FILE: "file not readable",
            pdfium_c.FPDF_ERR_PAGE: "page tree missing or damaged",
        }.get(exc.err_code, "unknown error")
        raise _PdfiumFailed(reason) from None
    try:
        pages: list[str] = []
        failed = 0
        for index in range(len(pdf)):
            try:
                page = pdf[index]
                try:
                    textpage = page.get_textpage()
                    try:
                        pages.append(textpage.get_text_bounded())
                    finally:
                        textpage.close()
                finally:
                    page.close()
            except pdfium.PdfiumError:
                failed += 1
                pages.append("")
        if failed:
            logger.warning("PDF: text of %d of %d pages unreadable", failed, len(pages))
            if failed == len(pages):
                raise _PdfiumFailed("no page could be read")
        bookmarks: list[_Bookmark] = []
        try:
            for bm in pdf.get_toc(max_depth=6):
                dest = bm.get_dest()
                index = dest.get_index() if dest is not None else None
                title = clean_inline(bm.get_title())
                if index is not None and title:
                    bookmarks.append(_Bookmark(bm.level + 1, title, index))
        except Exception:  # noqa: BLE001 - the outline is a bonus
            logger.debug("PDF outline unreadable", exc_info=True)
        return pages, bookmarks
    finally:
        pdf.close()


def _read_pypdf(data: bytes, first_reason: str) -> tuple[list[str], list[_Bookmark]]:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                if not reader.decrypt(""):
                    raise ParseError(ENCRYPTED)
            except (DependencyError, NotImplementedError, FileNotDecryptedError):
                raise ParseError(ENCRYPTED) from None
        pages = [page.extract_text() or "" for page in reader.pages]
    except ParseError:
        raise
    except FileNotDecryptedError:
        raise ParseError(ENCRYPTED) from None
    except Exception as exc:  # noqa: BLE001 - pypdf is the last resort: anything here means damaged
        raise _damaged(first_reason if not str(exc) else f"{first_reason}; {exc}") from None
    if not pages:
        raise _damaged(f"{first_reason}; no pages")
    bookmarks: list[_Bookmark] = []
    try:
        def walk(items: list, level: int) -> None:
            for item in items:
                if isinstance(item, list):
                    walk(item, level + 1)
                else:
                    index = reader.get_destination_page_number(item)
                    title = clean_inline(str(item.title or ""))
                    if index is not None and index >= 0 and title:
                        bookmarks.append(_Bookmark(level, title, index))

        walk(reader.outline, 1)
    except Exception:  # noqa: BLE001 - the outline is a bonus
        logger.debug("PDF outline unreadable (pypdf)", exc_info=True)
    return pages, bookmarks
