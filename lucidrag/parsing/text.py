"""Plain text: decoding (BOM → UTF-8 → chardet → GB18030) and binary detection.

The decoding chain is shared by CSV, HTML, Markdown and JSON."""

from __future__ import annotations

import codecs
import logging

from lucidrag.document import Document, Section
from lucidrag.errors import ParseError

from ._common import clean_text

logger = logging.getLogger(__name__)

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# chardet names → the codec we decode with (GB2312/GBK are subsets of GB18030; Big5-HKSCS ⊃ Big5).
_ENCODING_ALIASES = {
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "cp936": "gb18030",
    "gb18030": "gb18030",
    "big5": "big5hkscs",
    "cp950": "big5hkscs",
    "ascii": "utf-8",
    "shift_jis": "cp932",
    "euc-kr": "cp949",
}
# Multi-byte encodings decode most byte strings only when they really are that encoding, so a
# low chardet confidence is still trustworthy; a single-byte guess needs far more confidence.
_MULTIBYTE = {"gb18030", "big5hkscs", "cp932", "euc_jp", "euc-jp", "cp949", "utf-16", "utf-32",
              "iso2022_jp", "iso-2022-jp", "iso-2022-kr", "hz-gb-2312", "johab"}
_MULTIBYTE_MIN_CONFIDENCE = 0.2
_SINGLE_BYTE_MIN_CONFIDENCE = 0.6
_SAMPLE = 256 * 1024
_MAX_JUNK_RATIO = 0.05


class NotTextError(ParseError):
    """The bytes are not text in any encoding we recognise."""


def _utf16_without_bom(data: bytes) -> str | None:
    sample = data[:4096]
    if len(sample) < 4:
        return None
    even_nuls = sample[0::2].count(0)
    odd_nuls = sample[1::2].count(0)
    half = len(sample) / 2
    if odd_nuls > 0.3 * half and even_nuls < 0.05 * half:
        return "utf-16-le"
    if even_nuls > 0.3 * half and odd_nuls < 0.05 * half:
        return "utf-16-be"
    return None


def _normalise_encoding(name: str) -> str:
    name = name.lower().replace("_", "-")
    alias = _ENCODING_ALIASES.get(name)
    if alias:
        return alias
    try:
        return codecs.lookup(name).name
    except LookupError:
        return ""


def _too_much_junk(text: str) -> bool:
    """Control / replacement characters above 5% of a sample (and more than a stray few)."""
    sample = text[:_SAMPLE]
    junk = sum(1 for ch in sample if (ch < " " and ch not in "\t\n\r\x0c") or ch == "\ufffd")
    return junk > max(3, _MAX_JUNK_RATIO * len(sample))


def decode_text(data: bytes, *, label: str = "file", declared: str = "") -> str:
    """Decode bytes as text, or raise NotTextError.

    Order: BOM, a `declared` charset (HTML meta) if it decodes strictly, UTF-16 without BOM,
    strict UTF-8, chardet (trusted only with enough confidence), strict GB18030; last resort the
    best guess with replacement characters, rejected if that leaves too much junk."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            text = data[len(bom):].decode(encoding, errors="replace")
            return _check_text(text, label)
    if declared:
        encoding = _normalise_encoding(declared)
        if encoding:
            try:
                return _check_text(data.decode(encoding), label)
            except UnicodeDecodeError:
                pass
    utf16 = _utf16_without_bom(data)
    if utf16:
        return _check_text(data.decode(utf16, errors="replace"), label)
    sample = data[:_SAMPLE]
    if sample.count(0) > max(3, 0.01 * len(sample)):
        raise _binary_error(label)
    try:
        return _check_text(data.decode("utf-8"), label)
    except UnicodeDecodeError:
        pass

    guess = ""
    try:
        import chardet

        result = chardet.detect(data[:_SAMPLE])
        guess = _normalise_encoding(result.get("encoding") or "")
        confidence = result.get("confidence") or 0.0
    except Exception:  # noqa: BLE001 - detection is best effort
        logger.debug("chardet failed", exc_info=True)
        confidence = 0.0
    if guess and guess != "utf-8":
        needed = _MULTIBYTE_MIN_CONFIDENCE if guess in _MULTIBYTE else _SINGLE_BYTE_MIN_CONFIDENCE
        if confidence >= needed:
            try:
                return _check_text(data.decode(guess), label)
            except UnicodeDecodeError:
                pass
    try:
        return _check_text(data.decode("gb18030"), label)
    except UnicodeDecodeError:
        pass
    return _check_text(data.decode(guess or "utf-8", errors="replace"), label)


def _binary_error(label: str) -> NotTextError:
    return NotTextError(
        f"This {label} is not text (it looks binary). Check that you uploaded the right file, "
        "or convert it to a supported document type (UTF-8 or GBK text, .docx, .pdf …) and upload again."
    )


def _check_text(text: str, label: str) -> str:
    if _too_much_junk(text):
        raise _binary_error(label)
    return text


WHITESPACE_ONLY = "The file contains only whitespace — there is no text to index. Upload a file with text."


def require_content(text: str, label: str = "file") -> None:
    if not text.strip():
        raise ParseError(WHITESPACE_ONLY)


def looks_like_text(data: bytes) -> bool:
    """Cheap check used by format detection for unknown extensions."""
    sample = data[:8192]
    if not sample:
        return False
    for bom, _ in _BOMS:
        if sample.startswith(bom):
            return True
    if b"\x00" in sample:
        return _utf16_without_bom(sample) is not None
    try:
        decode_text(sample)
    except ParseError:
        return False
    return True


def paragraphs(text: str) -> list[str]:
    """Split on blank lines; keeps the text of each paragraph as written."""
    return [p for p in (part.strip("\n") for part in text.split("\n\n")) if p.strip()]


def parse_text(data: bytes, ext: str) -> Document:
    label = f"{ext} file" if ext else "file"
    text = clean_text(decode_text(data, label=label))
    require_content(text, label)
    return Document(sections=(Section(text=text),), format="text")
