"""ZIP archives: each member parsed by its own extension; a bad member is logged and skipped.

Members are read and parsed one at a time against one budget for the whole archive (nested
zips included): unpacked bytes (an absolute cap and a ratio to the archive's size) and
characters of parsed text. Going past a budget fails the whole archive with a message naming the
limit, rather than indexing an arbitrary part of it."""

from __future__ import annotations

import io
import logging
import posixpath
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from lucidrag.base import limits
from lucidrag.base.errors import LimitExceeded, ParseError
from lucidrag.ingestion.document import Document, Section

MemberParser = Callable[..., Document]  # parse_bytes(data, filename, *, depth, budget)

logger = logging.getLogger(__name__)

MAX_MEMBERS = limits.ZIP_MAX_MEMBERS
MAX_TOTAL_BYTES = limits.ZIP_MAX_UNPACKED_BYTES
MAX_DEPTH = limits.ZIP_MAX_DEPTH
_MAX_REASONS = 8
_MB = 1024 * 1024


@dataclass
class ArchiveBudget:
    """What the rest of an archive may still unpack; shared with nested archives."""

    bytes_left: int
    chars_left: int
    bytes_message: str

    @classmethod
    def for_archive(cls, archive_size: int) -> ArchiveBudget:
        by_ratio = max(limits.ZIP_MAX_RATIO * archive_size, limits.ZIP_RATIO_FLOOR_BYTES)
        if by_ratio < MAX_TOTAL_BYTES:
            message = (f"This .zip archive unpacks to more than {limits.ZIP_MAX_RATIO} times its own size "
                       f"({_size(archive_size)} → more than {_size(by_ratio)}), which LucidRAG refuses as "
                       "a possible zip bomb. If its files are genuine, upload them unzipped.")
        else:
            message = (f"This .zip archive unpacks to more than {MAX_TOTAL_BYTES // _MB} MB. Split it "
                       "into smaller archives and upload them separately.")
        return cls(min(by_ratio, MAX_TOTAL_BYTES), limits.MAX_DOCUMENT_CHARS, message)

    def take_chars(self, count: int) -> None:
        self.chars_left -= count
        if self.chars_left < 0:
            raise LimitExceeded(
                f"This .zip archive holds more than {limits.MAX_DOCUMENT_CHARS:,} characters of text, "
                "the most LucidRAG indexes from one file. Split it into smaller archives and upload "
                "them separately.")


def _size(count: int) -> str:
    return f"{count / _MB:.1f} MB" if count >= _MB else f"{max(1, count // 1024)} KB"


def _member_name(info: zipfile.ZipInfo) -> str:
    """The member's path; names without the UTF-8 flag are cp437 per spec but usually GBK on
    Chinese Windows, so re-decode them."""
    name = info.filename
    if not info.flag_bits & 0x800:
        try:
            raw = name.encode("cp437")
        except UnicodeEncodeError:
            return name
        for encoding in ("utf-8", "gb18030"):
            try:
                return raw.decode(encoding)
            except UnicodeDecodeError:
                continue
    return name


def _skipped(name: str) -> bool:
    parts = [p for p in name.replace("\\", "/").split("/") if p]
    return not parts or any(p == "__MACOSX" or p.startswith(".") for p in parts) or \
        parts[-1].lower() in ("thumbs.db", "desktop.ini")


def _short(message: str, limit: int = 110) -> str:
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 1] + "…"


def parse_zip(data: bytes, ext: str, *, parse_member: MemberParser, depth: int = 0,
              budget: ArchiveBudget | None = None) -> Document:
    """The archive's members, each parsed by ``parse_member`` (the registry's ``parse_bytes``,
    passed in so that the archive reader does not import the table it is part of)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as exc:
        raise ParseError(f"This .zip archive is damaged or truncated ({_short(str(exc), 80)}). "
                         "Create the archive again and upload it.") from None
    members = [(info, _member_name(info)) for info in infos if not info.is_dir()]
    members = [(info, name) for info, name in members if not _skipped(name)]
    if not members:
        raise ParseError("This .zip archive contains no files to index.")
    if len(members) > MAX_MEMBERS:
        raise ParseError(f"This .zip archive has {len(members)} files; at most {MAX_MEMBERS} are "
                         "accepted. Split it into smaller archives and upload them separately.")
    if budget is None:
        budget = ArchiveBudget.for_archive(len(data))
    declared = sum(info.file_size for info, _ in members)
    if declared > MAX_TOTAL_BYTES:
        raise LimitExceeded(f"This .zip archive unpacks to {declared // _MB} MB; at most "
                            f"{MAX_TOTAL_BYTES // _MB} MB are accepted. Split it into smaller "
                            "archives and upload them separately.")
    if declared > budget.bytes_left:
        raise LimitExceeded(budget.bytes_message)

    sections: list[Section] = []
    failures: list[tuple[str, str]] = []
    parsed = 0
    for number, (info, name) in enumerate(members, start=1):
        base = posixpath.basename(name.replace("\\", "/"))
        member_ext = posixpath.splitext(base)[1].lower()
        try:
            if info.flag_bits & 0x1:
                raise ParseError("password-protected inside the archive")
            if member_ext == ".zip" and depth >= MAX_DEPTH:
                raise ParseError("nested archive too deep (only one level of zip-in-zip is opened)")
            if info.file_size > limits.ZIP_MAX_MEMBER_BYTES:
                raise LimitExceeded(
                    f"This .zip archive holds {_short(name, 80)}, which unpacks to {_size(info.file_size)}; "
                    f"LucidRAG reads files of at most {_size(limits.ZIP_MAX_MEMBER_BYTES)} from an archive "
                    "(ZIP_MAX_MEMBER_BYTES). Split that file into smaller ones, or upload it on its own.")
            content = _read(archive, info, budget)
            document = parse_member(content, base, depth=depth + 1, budget=budget)
            del content
            if member_ext != ".zip":  # a nested archive counted its own members
                budget.take_chars(sum(len(s.text) for s in document.sections))
        except LimitExceeded:
            archive.close()
            raise
        except ParseError as exc:
            logger.warning("zip member %d/%d (%s) skipped: %s", number, len(members),
                           member_ext or "no extension", type(exc).__name__)
            failures.append((name, str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - one bad member must not sink the archive
            logger.warning("zip member %d/%d (%s) failed unexpectedly: %s", number, len(members),
                           member_ext or "no extension", type(exc).__name__)
            failures.append((name, f"unexpected error ({type(exc).__name__})"))
            continue
        parsed += 1
        prefix = (name.strip("/"),)
        sections.extend(replace(s, headings=prefix + s.headings) for s in document.sections)
    archive.close()

    if not sections:
        reasons = "; ".join(f"{n}: {_short(m)}" for n, m in failures[:_MAX_REASONS])
        more = f"; and {len(failures) - _MAX_REASONS} more" if len(failures) > _MAX_REASONS else ""
        raise ParseError(f"None of the {len(members)} files in this .zip could be read — {reasons}{more}")
    metadata: dict[str, str | int] = {"members": len(members), "members_parsed": parsed,
                                      "members_skipped": len(failures)}
    if failures:
        metadata["skipped"] = "; ".join(f"{n}: {_short(m, 80)}" for n, m in failures[:_MAX_REASONS])
    return Document(sections=tuple(sections), format="zip", metadata=metadata)


def _read(archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: ArchiveBudget) -> bytes:
    """Read a member, trusting the actual decompressed size rather than the declared one (zipfile
    stops at the declared size and fails on a CRC that does not match)."""
    limit = min(budget.bytes_left, limits.ZIP_MAX_MEMBER_BYTES)
    try:
        with archive.open(info) as handle:
            content = handle.read(limit + 1)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
        raise ParseError(f"damaged inside the archive ({_short(str(exc), 60)})") from None
    except RuntimeError as exc:  # zipfile raises it for encrypted members
        raise ParseError(f"cannot be read ({_short(str(exc), 60)})") from None
    if len(content) > limit:
        raise LimitExceeded(budget.bytes_message)
    budget.bytes_left -= len(content)
    return content


def check_office_container(data: bytes, label: str, *, streamed: tuple[str, ...] = ()) -> None:
    """An Office file (.docx/.pptx/.xlsx/.ods) is a zip whose parts the readers unpack: python-docx
    and python-pptx read every part whole (pictures too: a 0.6 MB .docx whose picture inflated to
    600 MB held 1.2 GB) and hold its XML as lxml trees; calamine holds a workbook's shared strings
    and inflates a part past the size it declares. So every part, media included, counts against
    the archive limits, first by its declared size, then decompressed here in bounded chunks before
    any reader sees it (Python's zipfile stops at the declared size and checks the CRC, so a part
    that lies about its size fails as damaged), and the XML a reader holds whole (parts but media
    and those under a `streamed` prefix, which their own check reads: sheetgrid.py) is counted
    against limits.OFFICE_MAX_XML_BYTES and OFFICE_MAX_XML_ELEMENTS."""
    try:
        container = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError):
        return  # the format's own parser reports the damage
    budget = ArchiveBudget.for_archive(len(data))
    with container:
        infos = container.infolist()
        _check_unpacked(sum(info.file_size for info in infos), len(data), budget, label)
        xml = _HeldXml(label)
        xml.add_bytes(sum(info.file_size for info in infos if _held(info.filename, streamed)))
        unpacked = sum(info.file_size for info in infos if info.filename.startswith(streamed))
        for info in infos:
            if info.filename.startswith(streamed):
                continue
            is_held = _held(info.filename, streamed)
            for chunk in _chunks(container, info, budget.bytes_left - unpacked, label):
                unpacked += len(chunk)
                _check_unpacked(unpacked, len(data), budget, label)
                if is_held:
                    xml.add_elements(chunk.count(b"<") - chunk.count(b"</"))


def _held(name: str, streamed: tuple[str, ...]) -> bool:
    return not _is_media(name) and not name.startswith(streamed)


class _HeldXml:
    """XML a reader holds whole: bytes (declared, then checked by the streamed totals) and elements."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.elements = 0

    def add_bytes(self, count: int) -> None:
        if count > limits.OFFICE_MAX_XML_BYTES:
            raise LimitExceeded(
                f"This {self.label} file holds {_size(count)} of document XML; LucidRAG reads at most "
                f"{_size(limits.OFFICE_MAX_XML_BYTES)} (OFFICE_MAX_XML_BYTES), which keeps the memory of "
                "reading it bounded. Split it into smaller documents (or save it as PDF), then upload them.")

    def add_elements(self, count: int) -> None:
        self.elements += count
        if self.elements > limits.OFFICE_MAX_XML_ELEMENTS:
            raise LimitExceeded(
                f"This {self.label} file holds more than {limits.OFFICE_MAX_XML_ELEMENTS:,} XML elements "
                "(paragraphs, runs, cells, shapes …), the most LucidRAG reads from one file "
                "(OFFICE_MAX_XML_ELEMENTS; the reader holds every one in memory). Split it into smaller "
                "documents (or save it as PDF), then upload them.")


def _check_unpacked(unpacked: int, size: int, budget: ArchiveBudget, label: str) -> None:
    if unpacked <= budget.bytes_left:
        return
    if unpacked > MAX_TOTAL_BYTES:
        reason = f"more than the {MAX_TOTAL_BYTES // _MB} MB LucidRAG reads"
    else:
        reason = (f"more than {limits.ZIP_MAX_RATIO} times its own size ({_size(size)}), which "
                  "LucidRAG refuses as a possible zip bomb")
    raise LimitExceeded(f"This {label} file unpacks to {_size(unpacked)} (pictures and every other part "
                        f"counted), {reason}. Open it in the program that made it, save it again or split "
                        "it, then upload it.")


_CHUNK = 1 << 20


def _chunks(container: zipfile.ZipFile, info: zipfile.ZipInfo, allowed: int, label: str) -> Iterator[bytes]:
    """The part decompressed in chunks of _CHUNK bytes, stopped once past `allowed`."""
    size = 0
    try:
        with container.open(info) as part:
            while size <= allowed and (chunk := part.read(_CHUNK)):
                size += len(chunk)
                yield chunk
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
        raise damaged_part(label, info.filename, exc) from None


def damaged_part(label: str, name: str, exc: Exception) -> ParseError:
    return ParseError(f"This {label} file is damaged: its part {_short(name, 60)} cannot be unpacked "
                      f"({_short(str(exc), 60)}). Open it in the program that made it, save it again, then "
                      "upload it.")


_MEDIA_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".emf", ".wmf", ".svg",
                     ".mp4", ".mp3", ".wav", ".bin", ".ttf", ".odttf", ".fntdata")


def _is_media(name: str) -> bool:
    lower = name.lower()
    return "/media/" in lower or lower.startswith(("pictures/", "media/")) or lower.endswith(_MEDIA_EXTENSIONS)
