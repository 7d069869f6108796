"""ZIP archives: each member parsed by its own extension; a bad member is logged and skipped."""

from __future__ import annotations

import io
import logging
import posixpath
import zipfile
from dataclasses import replace

from lucidrag.document import Document, Section
from lucidrag.errors import ParseError

logger = logging.getLogger(__name__)

MAX_MEMBERS = 500
MAX_TOTAL_BYTES = 200 * 1024 * 1024
MAX_DEPTH = 1  # a zip inside a zip is opened; one more level down is skipped
_MAX_REASONS = 8


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


def parse_zip(data: bytes, ext: str = ".zip", *, depth: int = 0, budget: list[int] | None = None) -> Document:
    from .registry import parse_bytes

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
        budget = [MAX_TOTAL_BYTES]
    declared = sum(info.file_size for info, _ in members)
    if declared > budget[0]:
        raise ParseError(f"This .zip archive unpacks to {declared // (1024 * 1024)} MB; at most "
                         f"{MAX_TOTAL_BYTES // (1024 * 1024)} MB are accepted. Split it into smaller "
                         "archives and upload them separately.")

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
            content = _read(archive, info, budget)
            document = parse_bytes(content, base, depth=depth + 1, budget=budget)
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


def _read(archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: list[int]) -> bytes:
    """Read a member, trusting the actual decompressed size rather than the declared one."""
    limit = budget[0]
    try:
        with archive.open(info) as handle:
            content = handle.read(limit + 1)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
        raise ParseError(f"damaged inside the archive ({_short(str(exc), 60)})") from None
    except RuntimeError as exc:  # zipfile raises it for encrypted members
        raise ParseError(f"cannot be read ({_short(str(exc), 60)})") from None
    if len(content) > limit:
        raise ParseError(f"the archive unpacks to more than {MAX_TOTAL_BYTES // (1024 * 1024)} MB")
    budget[0] -= len(content)
    return content
