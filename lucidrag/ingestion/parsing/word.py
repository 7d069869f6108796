"""Word .docx: walks the body XML (w:p, w:tbl, w:sdt) once; heading styles → heading paths; the
text of pictures (OCR) where they are anchored, marked as picture text."""

from __future__ import annotations

import io
import re

from lucidrag.base.errors import ParseError
from lucidrag.ingestion.document import Document

from ._common import SectionBuilder, TableWriter, clean_inline, opening_package
from .ocr import OcrTally, PictureRead, picture_text, read_picture

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
_P, _TBL, _SDT, _SDT_CONTENT = W + "p", W + "tbl", W + "sdt", W + "sdtContent"
_TR, _TC, _T, _TAB, _BR, _CR = W + "tr", W + "tc", W + "t", W + "tab", W + "br", W + "cr"
_VAL = W + "val"
_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_BLIP = "{http://schemas.openxmlformats.org/drawingml/2006/main}blip"
_VML_IMAGE = "{urn:schemas-microsoft-com:vml}imagedata"
_SKIP = {MC + "Fallback", W + "del", W + "moveFrom", W + "instrText", W + "delText", W + "rPr",
         W + "pPr", W + "fldChar", W + "footnoteReference", W + "endnoteReference"}

# Built-in heading style names in English and as localized copies of Word/WPS store them.
_HEADING_NAME = re.compile(
    r"^(?:heading|标题|標題|見出し|제목|titre|überschrift|título|titolo|kop|nagłówek|заголовок|"
    r"başlık|rubrik|otsikko|overskrift)\s*([1-9])$",
    re.IGNORECASE,
)
_TITLE_NAMES = {"title", "标题", "標題", "表題", "titre", "titel", "título", "titolo", "заголовок"}


def _damaged(detail: str) -> ParseError:
    return ParseError(
        f"This Word document is damaged or is not a .docx file ({detail}). Open it in "
        "Word/WPS/LibreOffice, save it as .docx again, then upload it."
    )


class _Styles:
    """styleId → heading level (0 for Title, 1-9 for headings, None for body text)."""

    def __init__(self, document) -> None:
        self._levels: dict[str, int | None] = {}
        raw: dict[str, tuple[str, int | None, str | None]] = {}
        try:
            root = document.styles.element
        except Exception:  # noqa: BLE001 - a document may have no styles part
            root = None
        if root is not None:
            for style in root.iter(W + "style"):
                style_id = style.get(W + "styleId")
                if not style_id:
                    continue
                name_el = style.find(W + "name")
                name = name_el.get(_VAL, "") if name_el is not None else ""
                outline = style.find(f"{W}pPr/{W}outlineLvl")
                based = style.find(W + "basedOn")
                raw[style_id] = (
                    name,
                    _int(outline.get(_VAL)) if outline is not None else None,
                    based.get(_VAL) if based is not None else None,
                )
        for style_id in raw:
            self._levels[style_id] = self._resolve(style_id, raw, 0)

    def _resolve(self, style_id: str, raw: dict, depth: int) -> int | None:
        if style_id not in raw or depth > 10:
            return None
        name, outline, based = raw[style_id]
        key = name.strip().lower()
        match = _HEADING_NAME.match(key) or _HEADING_NAME.match(style_id)
        if match:
            return int(match.group(1))
        if key in _TITLE_NAMES or style_id.lower() == "title":
            return 0
        if outline is not None and 0 <= outline <= 8:
            return outline + 1
        return self._resolve(based, raw, depth + 1) if based else None

    def level(self, style_id: str | None) -> int | None:
        return self._levels.get(style_id) if style_id else None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _text(element) -> str:
    """All visible text under an element, skipping deleted text and compatibility fallbacks."""
    parts: list[str] = []
    stack = [iter(element)]
    while stack:
        for child in stack[-1]:
            tag = child.tag
            if not isinstance(tag, str) or tag in _SKIP:
                continue
            if tag == _T:
                if child.text:
                    parts.append(child.text)
            elif tag == _TAB:
                parts.append("\t")
            elif tag in (_BR, _CR):
                parts.append("\n")
            elif tag == _P and parts and parts[-1] != "\n":
                parts.append("\n")  # paragraphs inside text boxes
                stack.append(iter(child))
                break
            else:
                stack.append(iter(child))
                break
            continue
        else:
            stack.pop()
    return "".join(parts)


def _paragraph_level(p, styles: _Styles) -> int | None:
    ppr = p.find(W + "pPr")
    if ppr is None:
        return None
    outline = ppr.find(W + "outlineLvl")
    if outline is not None:
        value = _int(outline.get(_VAL))
        if value is not None:
            return value + 1 if 0 <= value <= 8 else None
    style = ppr.find(W + "pStyle")
    return styles.level(style.get(_VAL)) if style is not None else None


def _table(tbl) -> str:
    writer = TableWriter()
    above: dict[int, str] = {}  # grid column → text, for vertically merged cells
    for tr in tbl.iter(_TR):
        if tr.getparent() is not tbl:
            continue  # rows of nested tables are flattened into their cell's text
        cells: list[str] = []
        for tc in tr.iterchildren(_TC):
            tcpr = tc.find(W + "tcPr")
            span, vmerge = 1, None
            if tcpr is not None:
                grid = tcpr.find(W + "gridSpan")
                span = max(1, _int(grid.get(_VAL)) or 1) if grid is not None else 1
                vm = tcpr.find(W + "vMerge")
                if vm is not None:
                    vmerge = vm.get(_VAL, "continue")
            column = len(cells)
            if vmerge == "continue":
                text = above.get(column, "")
            else:
                text = clean_inline(
                    " ".join(_text(p) for p in tc.iterchildren() if p.tag in (_P, _TBL, _SDT))
                )
            for offset in range(span):
                above[column + offset] = text if offset == 0 else ""
                cells.append(text if offset == 0 else "")
        writer.add_row(cells)
    return writer.render()


# Macro-enabled documents and templates have the same body XML; python-docx only knows .docx.
_EXTRA_MAIN_TYPES = (
    "application/vnd.ms-word.document.macroEnabled.main+xml",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml",
    "application/vnd.ms-word.template.macroEnabledTemplate.main+xml",
)


def _open(data: bytes):
    import docx  # noqa: F401 - registers python-docx's part classes
    from docx.opc.part import PartFactory
    from docx.package import Package
    from docx.parts.document import DocumentPart

    for content_type in _EXTRA_MAIN_TYPES:
        PartFactory.part_type_for.setdefault(content_type, DocumentPart)
    part = Package.open(io.BytesIO(data)).main_document_part
    if not isinstance(part, DocumentPart):
        raise ValueError(f"main part is {part.content_type}")
    return part.document


def parse_docx(data: bytes, ext: str = ".docx") -> Document:
    from docx.opc.exceptions import PackageNotFoundError

    with opening_package(_damaged, PackageNotFoundError, ".docx"):
        document = _open(data)

    styles = _Styles(document)
    builder = SectionBuilder()
    tally = OcrTally()
    body = document.element.body
    stack = [iter(body)]
    while stack:
        for child in stack[-1]:
            tag = child.tag
            if tag == _P:
                text = _text(child)
                level = _paragraph_level(child, styles)
                if level is not None and text.strip() and len(text) <= 300:
                    builder.heading(level, text)
                else:
                    builder.text(text)
                for picture in _pictures(child, document.part, tally):
                    if picture.text:
                        builder.flush()
                        builder.add(picture_text(picture.text))
                    for table in picture.tables:
                        builder.table(table)
                    if picture.png:
                        builder.picture(picture.png)
            elif tag == _TBL:
                table = _table(child)
                if table:
                    builder.table(table)
            elif tag == _SDT:
                content = child.find(_SDT_CONTENT)
                if content is not None:
                    stack.append(iter(content))
                    break
        else:
            stack.pop()
    sections = builder.finish()
    if not sections:
        raise ParseError("This Word document contains no text, not even in its pictures (read by "
                         "OCR). Upload a document with text.")
    return Document(sections=tuple(sections), format="docx", metadata=dict(tally.metadata()),
                    title=_core_title(document))


def _pictures(paragraph, part, tally: OcrTally) -> list[PictureRead]:  # noqa: ANN001 - lxml, DocumentPart
    """The pictures anchored in a paragraph (DrawingML and legacy VML), each once, read by OCR."""
    ids = [el.get(_R + "embed") for el in paragraph.iter(_BLIP)]
    ids += [el.get(_R + "id") for el in paragraph.iter(_VML_IMAGE)]
    texts = []
    for rel_id in dict.fromkeys(i for i in ids if i):
        try:
            blob = part.related_parts[rel_id].blob
        except (KeyError, AttributeError):  # an external (linked) picture or a broken relationship
            continue
        picture = read_picture(blob, tally)
        if picture.found:
            texts.append(picture)
    return texts


def _core_title(document) -> str:  # noqa: ANN001 - python-docx Document
    try:
        return str(document.core_properties.title or "")
    except Exception:  # noqa: BLE001 - a missing or damaged core.xml costs only the title
        return ""
