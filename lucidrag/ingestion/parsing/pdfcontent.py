"""A PDF's pages and content measured from its objects before PDFium interprets them.

PDFium's time grows with the content streams it runs, and every page that draws a stream runs it
again: pages sharing one heavy stream (or form) cost seconds each from a file of kilobytes. Here
the page tree is read with pypdf, each page's content streams and the forms its resources name are
decompressed in bounded chunks (each stream once: its size is remembered), and the sum over pages
is checked against limits.PDF_MAX_CONTENT_RATIO / PDF_CONTENT_FLOOR_BYTES / PDF_MAX_CONTENT_BYTES,
the page count against limits.MAX_PDF_PAGES. A PDF pypdf cannot read is left to PDFium (which then
reports the damage).

    check_pdf_content(data)
"""

from __future__ import annotations

import io
import logging
import zlib

from lucidrag.base import limits
from lucidrag.base.errors import LimitExceeded

logger = logging.getLogger(__name__)

_CHUNK = 1 << 20
_FORM_DEPTH = 4  # forms drawn by forms; deeper ones are not counted
_MB = 1024 * 1024


class _Budget:
    def __init__(self, file_size: int) -> None:
        by_ratio = max(limits.PDF_MAX_CONTENT_RATIO * file_size, limits.PDF_CONTENT_FLOOR_BYTES)
        self.allowed = min(by_ratio, limits.PDF_MAX_CONTENT_BYTES)
        self.file_size = file_size
        self.used = 0
        self.sizes: dict[tuple[int, int] | int, int] = {}


def check_pdf_content(data: bytes) -> None:
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            return  # PDFium says it is encrypted
        declared = int(reader.trailer["/Root"]["/Pages"].get("/Count", 0))
        if declared > limits.MAX_PDF_PAGES:
            raise _too_many_pages(declared)
        pages = reader.pages
        count = len(pages)
    except LimitExceeded:
        raise
    except Exception as exc:  # noqa: BLE001 - pypdf chokes on what PDFium may still read
        logger.info("PDF content not measured (pypdf: %s)", type(exc).__name__)
        return
    if count > limits.MAX_PDF_PAGES:
        raise _too_many_pages(count)
    budget = _Budget(len(data))
    for number in range(count):
        try:
            page = pages[number]
            _add_contents(page.get("/Contents"), budget)
            _add_forms(page.get("/Resources"), budget, _FORM_DEPTH, set())
        except LimitExceeded:
            raise _too_much_content(number + 1, count, budget) from None
        except Exception as exc:  # noqa: BLE001 - a page pypdf cannot read: PDFium decides
            logger.info("PDF page %d content not measured (pypdf: %s)", number + 1, type(exc).__name__)


def _add_contents(contents, budget: _Budget) -> None:  # noqa: ANN001 - pypdf objects
    if contents is None:
        return
    ref = getattr(contents, "indirect_reference", None)
    contents = contents.get_object()
    if isinstance(contents, list):
        for item in contents:
            _add_contents(item, budget)
        return
    _add_stream(contents, ref, budget)


def _add_forms(resources, budget: _Budget, depth: int, seen: set) -> None:  # noqa: ANN001
    if resources is None or depth <= 0:
        return
    xobjects = resources.get_object().get("/XObject")
    if xobjects is None:
        return
    for item in xobjects.get_object().values():
        ref = getattr(item, "indirect_reference", None) or item
        key = (ref.idnum, ref.generation) if hasattr(ref, "idnum") else id(item)
        if key in seen:
            continue
        seen.add(key)
        stream = item.get_object()
        if stream.get("/Subtype") != "/Form":
            continue
        _add_stream(stream, ref, budget)
        _add_forms(stream.get("/Resources"), budget, depth - 1, seen)


def _add_stream(stream, ref, budget: _Budget) -> None:  # noqa: ANN001
    key = (ref.idnum, ref.generation) if hasattr(ref, "idnum") else id(stream)
    size = budget.sizes.get(key)
    if size is None:
        size = budget.sizes[key] = _decoded_size(stream, budget.allowed - budget.used)
    budget.used += size
    if budget.used > budget.allowed:
        raise LimitExceeded("content")


def _decoded_size(stream, allowed: int) -> int:  # noqa: ANN001 - pypdf StreamObject
    """Bytes the stream decodes to, counted in bounded chunks and stopped past `allowed`."""
    raw = getattr(stream, "_data", b"") or b""
    filters = stream.get("/Filter")
    if filters is None:
        return len(raw)
    names = [str(f) for f in (filters if isinstance(filters, list) else [filters])]
    if names[:1] in (["/FlateDecode"], ["/Fl"]) and len(names) == 1:
        return _inflated_size(raw, allowed)
    try:
        return len(stream.get_data())  # other filters: pypdf's decoders cap their own output
    except Exception:  # noqa: BLE001 - undecodable: PDFium draws nothing of it either
        return len(raw)


def _inflated_size(raw: bytes, allowed: int) -> int:
    inflater = zlib.decompressobj()
    size = 0
    pending = raw
    try:
        while pending and size <= allowed:
            size += len(inflater.decompress(pending, _CHUNK))
            pending = inflater.unconsumed_tail
    except zlib.error:
        pass  # a damaged stream: what inflated so far is what PDFium runs
    return size


def _too_many_pages(count: int) -> LimitExceeded:
    return LimitExceeded(
        f"This PDF has {count:,} pages; LucidRAG reads PDFs of at most {limits.MAX_PDF_PAGES:,} pages "
        "(MAX_PDF_PAGES). Split it into smaller PDFs and upload them separately.")


def _too_much_content(page: int, pages: int, budget: _Budget) -> LimitExceeded:
    return LimitExceeded(
        f"This PDF's pages draw more than {_size(budget.allowed)} of content (by page {page:,} of {pages:,}; "
        "content shared between pages counts on every page that draws it), the most LucidRAG lets the PDF "
        f"reader run for a file of {_size(budget.file_size)}: PDF_MAX_CONTENT_RATIO is "
        f"{limits.PDF_MAX_CONTENT_RATIO} × the file's size, at least {_size(limits.PDF_CONTENT_FLOOR_BYTES)} "
        f"and at most {_size(limits.PDF_MAX_CONTENT_BYTES)} (PDF_MAX_CONTENT_BYTES); it stops files built to "
        "stall the reader. Print it to a new PDF or split it, then upload it again.")


def _size(count: int) -> str:
    return f"{count / _MB:.1f} MB" if count >= _MB else f"{max(1, count // 1024)} KB"
