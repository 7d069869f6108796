"""Format detection (extension → MIME type → magic bytes) and the parser table."""

from __future__ import annotations

import io
import logging
import posixpath
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import replace

from lucidrag.base import limits
from lucidrag.base.errors import ParseError, UnsupportedFormatError
from lucidrag.ingestion.document import Document, Section

from ._common import clean_text, clip_heading
from .archive import ArchiveBudget, check_office_container, parse_zip
from .faqtext import question_answer_sections
from .sheetgrid import STREAMED_SHEETS
from .text import too_much_text

logger = logging.getLogger(__name__)

Parser = Callable[..., Document]

# extension → format family
_EXTENSIONS: dict[str, str] = {
    ".pdf": "pdf",
    ".docx": "docx", ".docm": "docx", ".dotx": "docx", ".dotm": "docx",
    ".pptx": "pptx", ".pptm": "pptx", ".ppsx": "pptx", ".potx": "pptx",
    ".xlsx": "spreadsheet", ".xlsm": "spreadsheet", ".xlsb": "spreadsheet", ".xls": "spreadsheet",
    ".ods": "spreadsheet",
    ".csv": "delimited", ".tsv": "delimited",
    ".html": "html", ".htm": "html", ".xhtml": "html",
    ".md": "markdown", ".markdown": "markdown", ".mdown": "markdown", ".mkd": "markdown",
    ".json": "json", ".jsonl": "json", ".ndjson": "json",
    ".txt": "text", ".text": "text", ".log": "text",
    ".zip": "zip",
    ".doc": "legacy_doc", ".dot": "legacy_doc", ".wps": "legacy_doc",
    ".ppt": "legacy_ppt", ".pps": "legacy_ppt", ".pot": "legacy_ppt", ".dps": "legacy_ppt",
    ".rtf": "rtf",
    ".odt": "odf", ".odp": "odf",
}
# Pictures: read by OCR (images.py); formats Pillow cannot open get its "save as PNG" message.
# Plain-text files under other names: parsed as text.
TEXT_EXTENSIONS = (
    ".rst", ".adoc", ".asciidoc", ".org", ".tex", ".ini", ".cfg", ".conf", ".toml", ".yaml", ".yml",
    ".xml", ".srt", ".vtt", ".properties", ".env", ".sql", ".py", ".js", ".ts", ".java", ".c", ".h",
    ".cpp", ".hpp", ".cs", ".go", ".rs", ".rb", ".php", ".sh", ".bat", ".ps1", ".css", ".scss",
    ".kt", ".swift", ".lua", ".r", ".m", ".pl", ".vue", ".jsx", ".tsx",
)
for _ext in TEXT_EXTENSIONS:
    _EXTENSIONS.setdefault(_ext, "text")
_IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp", ".heic",
                     ".heif", ".svg", ".ico")
for _ext in _IMAGE_EXTENSIONS:
    _EXTENSIONS[_ext] = "image"

_MIME_TYPES: dict[str, tuple[str, str]] = {
    "application/pdf": ("pdf", ".pdf"),
    "application/x-pdf": ("pdf", ".pdf"),
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ("docx", ".docx"),
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ("pptx", ".pptx"),
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ("spreadsheet", ".xlsx"),
    "application/vnd.ms-excel": ("spreadsheet", ".xls"),
    "application/vnd.ms-excel.sheet.macroenabled.12": ("spreadsheet", ".xlsm"),
    "application/vnd.oasis.opendocument.spreadsheet": ("spreadsheet", ".ods"),
    "application/msword": ("legacy_doc", ".doc"),
    "application/vnd.ms-powerpoint": ("legacy_ppt", ".ppt"),
    "application/rtf": ("rtf", ".rtf"),
    "text/rtf": ("rtf", ".rtf"),
    "text/csv": ("delimited", ".csv"),
    "application/csv": ("delimited", ".csv"),
    "text/tab-separated-values": ("delimited", ".tsv"),
    "text/html": ("html", ".html"),
    "application/xhtml+xml": ("html", ".html"),
    "text/markdown": ("markdown", ".md"),
    "text/x-markdown": ("markdown", ".md"),
    "application/json": ("json", ".json"),
    "text/json": ("json", ".json"),
    "application/x-ndjson": ("json", ".jsonl"),
    "application/jsonl": ("json", ".jsonl"),
    "application/x-jsonlines": ("json", ".jsonl"),
    "text/plain": ("text", ".txt"),
    "application/zip": ("zip", ".zip"),
    "application/x-zip-compressed": ("zip", ".zip"),
}

# What a refused upload is told it may upload instead (README.md → "Supported formats" names the same).
NAMED_EXTENSIONS: tuple[str, ...] = (
    ".pdf", ".docx", ".docm", ".pptx", ".ppsx", ".xlsx", ".xlsm", ".xls", ".xlsb", ".ods", ".csv", ".tsv",
    ".html", ".htm", ".md", ".markdown", ".json", ".jsonl", ".txt", ".text", ".log", ".zip",
    ".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff",
)
SUPPORTED_EXTENSIONS: tuple[str, ...] = NAMED_EXTENSIONS + TEXT_EXTENSIONS

_DEFAULT_EXT = {"pdf": ".pdf", "docx": ".docx", "pptx": ".pptx", "spreadsheet": ".xlsx",
                "delimited": ".csv", "html": ".html", "markdown": ".md", "json": ".json",
                "text": ".txt", "zip": ".zip", "legacy_doc": ".doc", "legacy_ppt": ".ppt",
                "rtf": ".rtf", "image": ".png"}

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"II*\x00", b"MM\x00*")
# Formats whose signature is unambiguous: they win over a wrong extension.
_STRONG = {"pdf", "docx", "pptx", "spreadsheet", "zip", "legacy_doc", "legacy_ppt", "image", "rtf",
           "encrypted_office"}


def _sniff(data: bytes) -> tuple[str, str] | None:
    """Format from magic bytes: (family, extension) or None."""
    head = data[:1024]
    if b"%PDF-" in head:
        return "pdf", ".pdf"
    if data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _sniff_zip(data)
    if data.startswith(_OLE_MAGIC):
        return _sniff_ole(data)
    if data.startswith(_IMAGE_MAGIC) or (data[:4] == b"RIFF" and data[8:12] == b"WEBP") or (
            data[:2] == b"BM" and len(data) > 26 and int.from_bytes(data[2:6], "little") == len(data)):
        return "image", ".png"
    if data.startswith(b"{\\rtf"):
        return "rtf", ".rtf"
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if start.startswith((b"<!doctype html", b"<html")):
        return "html", ".html"
    return None


def _sniff_zip(data: bytes) -> tuple[str, str]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
            if "word/document.xml" in names:
                return "docx", ".docx"
            if "ppt/presentation.xml" in names:
                return "pptx", ".pptx"
            if "xl/workbook.xml" in names or "xl/workbook.bin" in names:
                return "spreadsheet", ".xlsx"
            if "mimetype" in names:
                mimetype = archive.read("mimetype")[:100]
                if b"opendocument.spreadsheet" in mimetype:
                    return "spreadsheet", ".ods"
                if b"opendocument" in mimetype:
                    return "odf", ".odt"
    except (zipfile.BadZipFile, OSError, KeyError, ValueError):
        pass
    return "zip", ".zip"


def _sniff_ole(data: bytes) -> tuple[str, str]:
    sample = data[: 4 << 20]

    def has(name: str) -> bool:
        return name.encode("utf-16-le") in sample

    if has("EncryptedPackage"):
        return "encrypted_office", ""
    if has("WordDocument"):
        return "legacy_doc", ".doc"
    if has("PowerPoint Document"):
        return "legacy_ppt", ".ppt"
    if has("Workbook") or has("Book"):
        return "spreadsheet", ".xls"
    return "ole", ""


def extension_of(filename: str) -> str:
    base = posixpath.basename(filename.replace("\\", "/"))
    _, dot, ext = base.rpartition(".")
    return f".{ext.lower()}" if dot and ext and " " not in ext and len(ext) <= 10 else ""


def detect(data: bytes, filename: str, mime_type: str = "") -> tuple[str, str]:
    """(format family, extension to report) for a file; the family may be "unknown"."""
    ext = extension_of(filename)
    claimed: tuple[str, str] | None = None
    if ext in _EXTENSIONS:
        claimed = (_EXTENSIONS[ext], ext)
    else:
        mime = mime_type.split(";", 1)[0].strip().lower()
        if mime in _MIME_TYPES:
            claimed = _MIME_TYPES[mime]
        elif mime.startswith("image/"):
            claimed = ("image", ext or "." + mime[6:])
    sniffed = _sniff(data)
    if claimed is None:
        if sniffed is not None:
            return sniffed
        from .text import looks_like_text

        if looks_like_text(data):
            return "text", ext
        return "unknown", ext
    family, claimed_ext = claimed
    if sniffed is None or sniffed[0] == family:
        return claimed
    s_family = sniffed[0]
    if family == "zip" or (s_family == "zip" and family in ("docx", "pptx", "spreadsheet")):
        # A .zip of an unpacked Office document is still an archive; a .docx that is a broken
        # (or foreign) zip gets the Word parser's "damaged" message.
        return claimed
    if s_family == "encrypted_office" and family in ("docx", "pptx", "spreadsheet", "legacy_doc",
                                                      "legacy_ppt"):
        return "encrypted_office", claimed_ext
    if s_family == "html" and family == "legacy_doc":
        return "html", claimed_ext  # Word/WPS "Web page" saved with a .doc name
    if s_family in _STRONG:
        return sniffed
    return claimed


# ---------------------------------------------------------------------------------------------
# Messages for what we do not parse


def _supported_list() -> str:
    return ", ".join(NAMED_EXTENSIONS) + " and other plain-text files"


def _unsupported(family: str, ext: str) -> UnsupportedFormatError:
    if family == "legacy_doc":
        return UnsupportedFormatError(
            f"Legacy Word {ext or '.doc'} files are not supported. Open it in Word/WPS/LibreOffice and "
            "save as .docx, then upload again.")
    if family == "legacy_ppt":
        return UnsupportedFormatError(
            f"Legacy PowerPoint {ext or '.ppt'} files are not supported. Open it in "
            "PowerPoint/WPS/LibreOffice and save as .pptx, then upload again.")
    if family == "rtf":
        return UnsupportedFormatError(
            "RTF files are not supported. Open it in Word/WPS/LibreOffice and save as .docx, then "
            "upload again.")
    if family == "odf":
        return UnsupportedFormatError(
            f"OpenDocument {ext or '.odt/.odp'} files are not supported (only .ods spreadsheets are). "
            "Open it in LibreOffice and save as .docx or .pptx, then upload again.")
    if family == "encrypted_office":
        return UnsupportedFormatError(
            f"This {ext or 'Office'} file is password-protected (encrypted). Remove the password, "
            "save it, then upload it again.")
    if family == "ole":
        return UnsupportedFormatError(
            "This is a legacy Microsoft Office file of an unknown kind. Open it in Office/WPS/LibreOffice, "
            "save it as .docx, .xlsx or .pptx, then upload again.")
    if ext:
        return UnsupportedFormatError(f"Unsupported file type {ext}. Supported: {_supported_list()}.")
    return UnsupportedFormatError(
        "Could not tell the file type: the name has no extension and the content is not a known "
        f"format. Supported: {_supported_list()}.")


def _parsers() -> dict[str, Parser]:
    from .images import parse_image
    from .jsondoc import parse_json
    from .markdown_text import parse_markdown
    from .pdf import parse_pdf
    from .sheets import parse_delimited, parse_spreadsheet
    from .slides import parse_pptx
    from .text import parse_text
    from .webpage import parse_html
    from .word import parse_docx

    return {
        "pdf": parse_pdf, "docx": parse_docx, "pptx": parse_pptx, "spreadsheet": parse_spreadsheet,
        "delimited": parse_delimited, "html": parse_html, "markdown": parse_markdown,
        "json": parse_json, "text": parse_text, "zip": parse_zip, "image": parse_image,
    }


def parse_bytes(data: bytes, filename: str, mime_type: str = "", *, depth: int = 0,
                budget: ArchiveBudget | None = None) -> Document:
    if not data:
        raise ParseError("The file is empty (0 bytes).")
    family, ext = detect(data, filename, mime_type)
    parser = _parsers().get(family)
    if parser is None:
        raise _unsupported(family, ext)
    label = ext or _DEFAULT_EXT.get(family, "")
    if family in ("docx", "pptx", "spreadsheet") and data.startswith(b"PK"):
        # calamine streams the sheets (their grid is measured by sheetgrid.py); the rest is held whole
        check_office_container(data, label, streamed=STREAMED_SHEETS if family == "spreadsheet" else ())
    try:
        if family == "zip":
            document = parser(data, ext or ".zip", parse_member=parse_bytes, depth=depth, budget=budget)
        else:
            document = parser(data, label)
    except ParseError:
        raise
    except MemoryError:
        raise ParseError(f"This {label} file is too large to parse in memory. Split it into smaller "
                         "files and upload them separately.") from None
    except Exception as exc:  # noqa: BLE001 - a library choking on a malformed file
        logger.warning("%s parser failed unexpectedly: %s", family, type(exc).__name__, exc_info=True)
        raise ParseError(f"Could not read this {label} file ({type(exc).__name__}); it may be damaged. "
                         "Open it in the program that made it, save it again, then upload it.") from exc
    return _finalise(document)


# JSON's "key: value" lines are data, whatever a key is called
_NO_QUESTION_ANSWER_TEXT = frozenset({"json", "jsonl"})


def _finalise(document: Document) -> Document:
    sections = []
    changed = False
    faq_text = document.format not in _NO_QUESTION_ANSWER_TEXT
    for section in document.sections:
        text = clean_text(section.text)
        headings = tuple(clip_heading(h) for h in section.headings)
        if text != section.text or headings != section.headings:
            changed = True
            if not text:
                continue
            section = replace(section, text=text, headings=headings)
        pairs = question_answer_sections(section) if faq_text else None
        if pairs is not None:
            changed = True
            untitled = len(pairs[-1].headings) == 1  # its question alone: no heading or title line above
            if untitled and not document.title and not any(s.headings for s in sections):
                # an untitled FAQ is named like any untitled file (as an FAQ sheet of a CSV is), not
                # by its first question
                document = replace(document, named_by_heading=False)
            sections.extend(pairs)  # headings clipped there, as above
            continue
        sections.append(section)
    if not sections:
        raise ParseError("No text found in this file. Upload a file that contains text.")
    check_document_chars(sections)
    if changed:
        document = replace(document, sections=tuple(sections))
    return document


def check_document_chars(sections: Sequence[Section]) -> None:
    """Past limits.MAX_DOCUMENT_CHARS the file fails, whichever parser produced it."""
    if sum(len(s.text) for s in sections) > limits.MAX_DOCUMENT_CHARS:
        raise too_much_text()
