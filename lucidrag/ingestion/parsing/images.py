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
    frames = getattr(image, "n_frames", 1)
    multi_page = image.format == "TIFF" and frames > 1  # (an MPO camera JPEG repeats one photo)
    if multi_page and frames > limits.MAX_OCR_PAGES:
        raise LimitExceeded(
            f"This {label} file has {frames:,} pages; LucidRAG reads at most {limits.MAX_OCR_PAGES} "
            "scanned pages per file (MAX_OCR_PAGES). Split it into smaller files and upload them "
            "separately.")
    tally = OcrTally()
    sections: list[Section] = []
    writer = OcrSections()
    pictures = ImageSequence.Iterator(image) if multi_page else [image]
    for number, frame in enumerate(pictures, start=1):
        check_pixels(frame.size, label)
        found = recognise(frame)
        if multi_page:
            tally.page(number, found)
        else:
            tally.picture(found)
        sections.extend(writer.page(found.blocks, number if multi_page else None))
    if not sections:
        raise ParseError(f"OCR found no text in this {label} picture. If it holds text, upload a "
                         "sharper or larger picture (at least ~20 px per line of text).")
    metadata: dict[str, str | int] = {"page_count": frames if multi_page else 1}
    metadata.update(tally.metadata())
    return Document(sections=tuple(sections), format="image", metadata=metadata,
                    title=next((h for s in sections for h in s.headings[:1]), "") or title_from(sections[0].text))
