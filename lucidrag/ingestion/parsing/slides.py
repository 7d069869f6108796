"""PowerPoint .pptx: one section per slide (page = slide number, heading = slide title), tables
as Markdown sections, speaker notes appended; the text of pictures (OCR) where they sit on the
slide, marked as picture text."""

from __future__ import annotations

import io

from lucidrag.base.errors import ParseError
from lucidrag.ingestion.document import Document, Section

from ._common import PICTURE_PLACEHOLDER, TableWriter, clean_inline, clean_text, opening_package
from .ocr import OcrTally, picture_text, read_picture


def _damaged(detail: str) -> ParseError:
    return ParseError(
        f"This PowerPoint file is damaged or is not a .pptx file ({detail}). Open it in "
        "PowerPoint/WPS/LibreOffice, save it as .pptx again, then upload it."
    )


def _shape_order(shape) -> tuple[int, int]:
    top = shape.top if shape.top is not None else 1 << 40
    left = shape.left if shape.left is not None else 1 << 40
    return top, left


def _walk(shapes, texts: list[str], tables: list[str], skip_id: int | None, tally: OcrTally,
          pictures: list[bytes]) -> None:
    from pptx.shapes.group import GroupShape

    for shape in sorted(shapes, key=_shape_order):
        if skip_id is not None and shape.shape_id == skip_id:
            continue
        if isinstance(shape, GroupShape):
            _walk(shape.shapes, texts, tables, skip_id, tally, pictures)
        elif (blob := _picture_blob(shape)) is not None:
            picture = read_picture(blob, tally)
            text = clean_text(picture.text)
            if text:
                texts.append(picture_text(text))
            tables.extend(picture.tables)
            if picture.png:
                pictures.append(picture.png)
        elif getattr(shape, "has_table", False) and shape.has_table:
            writer = TableWriter()
            for row in shape.table.rows:
                writer.add_row([clean_inline(cell.text_frame.text) for cell in row.cells])
            if writer.lines:
                tables.append(writer.render())
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            text = clean_text(shape.text_frame.text)
            if text:
                texts.append(text)


def _picture_blob(shape) -> bytes | None:  # noqa: ANN001 - a python-pptx shape
    """The bytes of a picture shape (or a placeholder holding one); None for other shapes."""
    try:
        image = getattr(shape, "image", None)
        return image.blob if image is not None else None
    except (AttributeError, KeyError, ValueError):  # a placeholder without a picture, a broken link
        return None


def parse_pptx(data: bytes, ext: str = ".pptx") -> Document:
    import pptx  # noqa: F401 - registers python-pptx's part classes
    from pptx.exc import PackageNotFoundError
    from pptx.package import Package
    from pptx.parts.presentation import PresentationPart

    with opening_package(_damaged, PackageNotFoundError, ".pptx"):
        # Package.open rather than Presentation(): the latter refuses templates (.potx/.ppsx).
        part = Package.open(io.BytesIO(data)).main_document_part
        if not isinstance(part, PresentationPart):
            raise ValueError(f"main part is {part.content_type}")
        presentation = part.presentation

    sections: list[Section] = []
    tally = OcrTally()
    for number, slide in enumerate(presentation.slides, start=1):
        title_shape = slide.shapes.title
        title = clean_inline(title_shape.text_frame.text) if title_shape is not None and \
            title_shape.has_text_frame else ""
        headings = (title,) if title else ()
        texts: list[str] = []
        tables: list[str] = []
        pictures: list[bytes] = []
        _walk(slide.shapes, texts, tables, title_shape.shape_id if title_shape is not None else None,
              tally, pictures)
        notes = ""
        if slide.has_notes_slide:
            frame = slide.notes_slide.notes_text_frame
            notes = clean_text(frame.text) if frame is not None else ""
        if notes:
            texts.append(f"Notes: {notes}")
        if not texts and not tables and title:
            texts.append(title)
        if texts:
            sections.append(Section(text="\n\n".join(texts), headings=headings, page=number))
        for table in tables:
            sections.append(Section(text=table, headings=headings, page=number, is_table=True))
        for png in pictures:
            sections.append(Section(text=PICTURE_PLACEHOLDER, headings=headings, page=number, picture=png))
    if not sections:
        raise ParseError("This presentation contains no text, not even in its pictures (read by "
                         "OCR). Upload slides with text.")
    try:
        title = str(part.package.core_properties.title or "")
    except Exception:  # noqa: BLE001 - a missing or damaged core.xml costs only the title
        title = ""
    metadata: dict[str, str | int] = {"slide_count": len(presentation.slides)}
    metadata.update(tally.metadata())
    return Document(sections=tuple(sections), format="pptx", metadata=metadata, title=title)
