"""The files of the simulated histories: each document number has its own query words, and each
upload of it (a version) its own text, so that a result tells which upload it came from."""

from __future__ import annotations

import functools
import random

from lucidrag.base.settings import parse_creation_settings
from lucidrag.ingestion.chunking import chunk_document
from lucidrag.ingestion.parsing import parse_file

MODEL = "embed-sim"
SETTINGS = {"embedding_model_uuid": MODEL}
KINDS = ("small", "medium", "large", "bad")
_PARAGRAPHS = {"small": 1, "medium": 6, "large": 18}  # large: past the simulated listing window

_FILLER = ("report", "system", "energy", "market", "policy", "water", "design", "network", "season",
           "garden", "history", "science", "travel", "music", "budget", "council", "harbour", "forest")
_SYLLABLES = ("ka", "zo", "ri", "mu", "te", "vo", "qa", "ly", "xe", "pu", "dra", "fen", "gor", "hul")


def doc_id(n: int) -> str:
    return f"doc-{n:03d}"


def doc_number(file_id: str) -> int:
    return int(file_id.split("-")[1]) if file_id.startswith("doc-") and file_id[4:].isdigit() else -1


def doc_words(n: int) -> list[str]:
    rng = random.Random(f"words-{n}")
    tag = "".join("abcdefghij"[int(d)] for d in str(n))
    return ["".join(rng.choice(_SYLLABLES) for _ in range(2)) + "x" + tag + "q" + rng.choice(_SYLLABLES)
            for _ in range(3)]


def tail_word(n: int) -> str:
    """A word only in the last paragraph of a large document: past the listing window."""
    return "tail" + "".join("abcdefghij"[int(d)] for d in str(n)) + "zq"


@functools.lru_cache(maxsize=4096)
def doc_bytes(n: int, kind: str, version: int = 0) -> bytes:
    if kind == "bad":
        return b""
    rng = random.Random(f"text-{n}" if version == 0 else f"text-{n}-{version}")
    words = doc_words(n)
    out = []
    for _ in range(_PARAGRAPHS[kind]):
        # the file's own words dominate its chunks, so that the hashing embedding finds them
        body = [rng.choice(_FILLER) for _ in range(12 if kind == "small" else 50)]
        for w in words * (2 if kind == "small" else 6):
            body.insert(rng.randrange(len(body)), w)
        out.append(" ".join(body) + ".")
    if kind == "large":
        out[-1] += f" {tail_word(n)}."
    return "\n\n".join(out).encode()


def _flat(text: str) -> str:
    return " ".join(text.split())


@functools.lru_cache(maxsize=4096)
def _flat_text(n: int, kind: str, version: int) -> str:
    return _flat(doc_bytes(n, kind, version).decode())


def versions_holding(n: int, kinds: list[str], text: str) -> set[int]:
    """The uploads of document `n` (kinds[v] is upload v's kind) whose text holds `text`."""
    flat = _flat(text)
    return {v for v, kind in enumerate(kinds) if kind != "bad" and flat in _flat_text(n, kind, v)}


@functools.lru_cache(maxsize=4096)
def expected_chunks(n: int, kind: str, version: int = 0) -> int:
    if kind == "bad":
        return 0
    document = parse_file(doc_bytes(n, kind, version), f"{doc_id(n)}.txt", "text/plain")
    return len(chunk_document(document, parse_creation_settings(SETTINGS)).chunks)
