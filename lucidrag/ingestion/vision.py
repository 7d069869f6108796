"""Optional: a short description of each picture in which OCR found no text, from the host's
vision model (`invoke_llm`), placed where the picture was.

Off unless the knowledge base names a vision model (creation setting `vision_model_uuid`).
Bounded per file: at most limits.MAX_VISION_PICTURES pictures, limits.VISION_CALL_S per call and
limits.VISION_FILE_S for all of them. A call that fails or times out costs only that picture's
description, never the file.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from dataclasses import replace
from typing import Any

from lucidrag.base import limits
from lucidrag.base.host import HostApi, describe
from lucidrag.ingestion.document import Document, Section

logger = logging.getLogger(__name__)

DESCRIPTION_MARK = "[Picture description]"
PROMPT = (
    "Describe this picture from a document for a search index, in at most 80 words: what it shows "
    "(chart, diagram, photo, screenshot...), its subject, and any numbers, labels or trends it "
    "conveys. Answer in the language of any words in the picture, else in English. No preamble."
)


async def describe_pictures(host: HostApi, document: Document, model_uuid: str) -> Document:
    """The document with each picture placeholder replaced by its description, or dropped."""
    if not any(s.picture is not None for s in document.sections):
        return document
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limits.VISION_FILE_S
    described = failed = 0
    sections: list[Section] = []
    for section in document.sections:
        if section.picture is None:
            sections.append(section)
            continue
        remaining = deadline - loop.time()
        if not model_uuid or remaining <= 0 or described + failed >= limits.MAX_VISION_PICTURES:
            continue
        try:
            text = await asyncio.wait_for(_describe(host, model_uuid, section.picture,
                                                    min(limits.VISION_CALL_S, remaining)),
                                          timeout=min(limits.VISION_CALL_S, remaining))
        except Exception as error:  # noqa: BLE001 - a description is a bonus
            failed += 1
            logger.warning("vision model %s could not describe a picture (%s)", model_uuid,
                           describe(error) if not isinstance(error, TimeoutError) else "timed out")
            continue
        if text:
            described += 1
            sections.append(replace(section, text=f"{DESCRIPTION_MARK}\n{text}", picture=None))
    metadata = dict(document.metadata)
    if described:
        metadata["vision_described"] = described
    if failed:
        metadata["vision_failed"] = failed
    return replace(document, sections=tuple(sections), metadata=metadata)


async def _describe(host: HostApi, model_uuid: str, png: bytes, timeout: float) -> str:
    from langbot_plugin.api.entities.builtin.provider.message import ContentElement, Message

    image = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    reply = await host.invoke_llm(
        llm_model_uuid=model_uuid,
        messages=[Message(role="user", content=[ContentElement.from_text(PROMPT),
                                                ContentElement.from_image_base64(image)])],
        timeout=timeout,
    )
    return " ".join(_text_of(reply.content).split())


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(getattr(part, "text", None) or "") for part in content)
    return ""
