"""Plain text: decoding (BOM → UTF-8 → chardet → GB18030) and binary detection.

The decoding chain is shared by CSV, HTML, Markdown and JSON."""

from __future__ import annotations

import codecs
import logging
import re

from lucidrag.base import limits
from lucidrag.base.errors import LimitExceeded, ParseError
from lucidrag.ingestion.document import Document, Section

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
_SINGLE_BYTE_MIN_CONFIDENCE = 0.3
_SAMPLE = 256 * 1024
_JUNK_RE = re.compile("[\x00-\x08\x0b\x0e-\x1f\x80-\x9f\ufffd]")  # controls but tab/newlines/form feed
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
    junk = len(_JUNK_RE.findall(sample))
    return junk > max(3, _MAX_JUNK_RATIO * len(sample))


def decode_text(data: bytes, *, label: str = "file", declared: str = "") -> str:
    """Decode bytes as text, or raise NotTextError.

    Order: BOM, a `declared` charset (HTML meta) if it decodes strictly, UTF-16 without BOM,
    strict UTF-8, a confident chardet guess other than Chinese, strict GB18030 or Big5 (whichever
    gives common characters), then chardet's weak guess / cp1252; last resort GB18030 with
    replacement characters, rejected if that leaves too much junk.

    Past the characters a file may hold before parsing (limits.TEXT_MARKUP_ALLOWANCE) it fails
    here, before any parser builds on it (and past TEXT_MAX_BYTES_PER_CHAR times that many bytes,
    before it is even decoded)."""
    if len(data) > _max_chars() * limits.TEXT_MAX_BYTES_PER_CHAR:
        raise _too_many_chars(label, f"{len(data):,} bytes")
    return _within_limit(_decode(data, label, declared), label)


def too_much_text() -> LimitExceeded:
    """Past limits.MAX_DOCUMENT_CHARS of parsed text, whichever parser found it."""
    return LimitExceeded(f"This file holds more than {limits.MAX_DOCUMENT_CHARS:,} characters of text, the most "
                         "LucidRAG indexes from one file. Split it into smaller files and upload them "
                         "separately.")


def _max_chars() -> int:
    return int(limits.MAX_DOCUMENT_CHARS * limits.TEXT_MARKUP_ALLOWANCE)


def _too_many_chars(label: str, size: str) -> LimitExceeded:
    return LimitExceeded(
        f"This {label} has {size} before parsing, markup included: more than the {_max_chars():,} LucidRAG "
        f"reads to index at most {limits.MAX_DOCUMENT_CHARS:,} characters of text from one file "
        "(MAX_DOCUMENT_CHARS, and a quarter more for markup). Split it into smaller files and upload them "
        "separately.")


def _within_limit(text: str, label: str) -> str:
    if len(text) > _max_chars():
        raise _too_many_chars(label, f"{len(text):,} characters")
    return text


def _decode(data: bytes, label: str, declared: str) -> str:
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
    utf8 = _mostly_utf8(data)
    if utf8 is not None:
        return _check_text(utf8, label)

    guess, confidence = _chardet(data)
    chinese_guess = guess in ("gb18030", "big5hkscs")
    if guess in _MULTIBYTE and not chinese_guess and confidence >= _MULTIBYTE_MIN_CONFIDENCE:
        try:
            return _check_text(data.decode(guess), label)
        except UnicodeDecodeError:
            pass
    single_byte = bool(guess) and guess not in _MULTIBYTE and guess != "utf-8"
    confident_single = single_byte and confidence >= _SINGLE_BYTE_MIN_CONFIDENCE
    chinese = _chinese(data, prefer_big5=guess == "big5hkscs", min_score=0.8 if confident_single else 0.5)
    if chinese is not None:
        return _check_text(chinese, label)
    for encoding in (guess if confident_single else "", "cp1252", guess):
        if encoding:
            try:
                return _check_text(data.decode(encoding), label)
            except UnicodeDecodeError:
                pass
    return _check_text(data.decode(guess or "gb18030", errors="replace"), label)


def _mostly_utf8(data: bytes) -> str | None:
    """UTF-8, also when the file was cut inside its last character or has a rare bad byte
    (at most one per thousand bytes: text in another encoding fails far more often)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start >= len(data) - 3:
            try:
                return data[: exc.start].decode("utf-8")
            except UnicodeDecodeError:
                return None
    if len(data) < 1000:
        return None
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    return text if bad * 1000 <= len(data) and len(text) < len(data) else None


def _chardet(data: bytes) -> tuple[str, float]:
    try:
        import chardet

        result = chardet.detect(data[:_SAMPLE])
    except Exception:  # noqa: BLE001 - detection is best effort
        logger.debug("chardet failed", exc_info=True)
        return "", 0.0
    return _normalise_encoding(result.get("encoding") or ""), result.get("confidence") or 0.0


def _common_ratio(text: str, codec: str, common_leads: range) -> float:
    """Share of the non-ASCII characters (in a sample) that are common characters of `codec`:
    mojibake from the other Chinese encoding lands mostly on rare characters and symbols."""
    sample = [ch for ch in text[:20000] if ord(ch) > 0x7F][:2000]
    if not sample:
        return 1.0
    common = 0
    for ch in sample:
        try:
            encoded = ch.encode(codec)
        except UnicodeEncodeError:
            continue
        if len(encoded) == 2 and (encoded[0] in common_leads or 0xA1 <= encoded[0] <= 0xA3):
            common += 1
    return common / len(sample)


_GB2312_HANZI = range(0xB0, 0xF8)
_BIG5_COMMON = range(0xA4, 0xC7)


def _chinese(data: bytes, *, prefer_big5: bool = False, min_score: float = 0.5) -> str | None:
    """Strict GB18030 or Big5, whichever reads as common Chinese characters (GB18030 on a tie)."""
    candidates: list[tuple[float, str]] = []
    for codec, check, leads, bonus in (
        ("gb18030", "gb2312", _GB2312_HANZI, 0.0),
        ("big5hkscs", "big5", _BIG5_COMMON, 0.05 if prefer_big5 else -0.01),
    ):
        try:
            text = data.decode(codec)
        except UnicodeDecodeError:
            continue
        candidates.append((_common_ratio(text, check, leads) + bonus, text))
    if not candidates:
        return None
    score, text = max(candidates, key=lambda c: c[0])
    # Latin-1/cp1252 text often decodes as GB18030 too, but into rare characters.
    return text if score >= min_score else None


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


def parse_text(data: bytes, ext: str) -> Document:
    label = f"{ext} file" if ext else "file"
    text = clean_text(decode_text(data, label=label))
    require_content(text, label)
    return Document(sections=(Section(text=text),), format="text")
