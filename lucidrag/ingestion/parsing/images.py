"""Picture uploads (.png .jpg .jpeg .webp .bmp .gif .tif .tiff): text by OCR, one section per
frame (a multi-page TIFF's frame number is its page)."""

from __future__ import annotations

from lucidrag.base import limits
from lucidrag.base.errors import LimitExceeded, ParseError
from lucidrag.ingestion.document import Document, Section

from .ocr import OcrTally, check_pixels, open_image, recognise, title_from
from .ocr_sections import OcrSections


def parse_image(data: bytes, ext: str = ".png") -> Document:
    from PIL import ImageSequence

    label = ext or "image"
    image = open_image(data, label)
    # Only a TIFF's pages are read (a GIF's or WebP's later frames and an MPO camera JPEG's copies
    # are not), so only its pages are counted: walking a GIF's frames reads all of them.
    frames = _tiff_pages(image, label) if image.format == "TIFF" else 1
    multi_page = frames > 1
    tally = OcrTally()
    sections: list[Section] = []
    writer = OcrSections()
    pictures = ImageSequence.Iterator(image) if multi_page else [image]
    for number, frame in enumerate(pictures, start=1):
        check_pixels(frame, label)
        found = recognise(frame)
        if multi_page:
            tally.page(number, found)
        else:
            tally.picture(found)
        sections.extend(writer.page(found.blocks, number if multi_page else None))
    if not sections:
        raise ParseError(f"OCR found no text in this {label} picture. If it holds text, upload a "
                         "sharper or larger picture (at least ~20 px per line of text).")
    metadata: dict[str, str | int] = {"page_count": frames}
    metadata.update(tally.metadata())
    return Document(sections=tuple(sections), format="image", metadata=metadata,
                    title=next((h for s in sections for h in s.headings[:1]), "") or title_from(sections[0].text))


def _tiff_pages(image, label: str) -> int:  # noqa: ANN001 - a PIL TiffImageFile
    """The TIFF's page count, its directories walked no further than limits.MAX_OCR_PAGES + 1."""
    try:
        image.seek(limits.MAX_OCR_PAGES)
    except EOFError:
        return image.n_frames  # (known now: the walk reached the last page)
    finally:
        image.seek(0)
    raise LimitExceeded(
        f"This {label} file has more than {limits.MAX_OCR_PAGES} pages; LucidRAG reads at most "
        f"{limits.MAX_OCR_PAGES} scanned pages per file (MAX_OCR_PAGES). Split it into smaller files "
        "and upload them separately.")
