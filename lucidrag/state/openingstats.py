"""The relevance cut's anchor: how close this KB's passages come to a question about its subject.

A file's opening sentence (index/probes.opening_question) stands for a question that file
answers; its best cosine over the chunks of the KB's other files is how close a question on this
KB's subject comes to passages that do not answer it. The median over the KB's first files is the
anchor (retrieval/relevance.py weighs a question's best cosine between the probe background and
it). Kept like the probe maxima (state/probestats.py: one stored value, no host call of its own):
the openings of a process's first MAX_OPENINGS uploads of a KB ride in their files' embedding
batches, and each later upload's chunks are compared with their vectors, held in memory for the
process. An opening is thus compared with the files committed after it in its process only: the
files before it are missed (on the measured collections the median lies 0-0.009 cosine below the
one over every other file, 0.026 on one, docs/BENCHMARKS.md), and after a restart it is compared
with nothing more (so only the openings that count are stored); both can only leave its best
cosine low, which weighs a question as closer to the KB than it is (the cut answers more). A
deleted file's opening stays.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np

MAX_OPENINGS = 48  # openings kept per KB (and asked per process)
MIN_OPENINGS = 12  # an anchor needs this many openings compared with at least MIN_COMPARED chunks
MIN_COMPARED = 20


@dataclass(frozen=True)
class Openings:
    """Openings' best cosines over other files' chunks and how many chunks each was compared with:
    this process's by file id (a later upload compares them again), those read from storage
    without one (no process compares them again; stored only once they count, as MIN_COMPARED)."""

    best: dict[str, tuple[float, int]] = field(default_factory=dict)
    kept: tuple[tuple[float, int], ...] = ()

    def merged(self, other: Openings) -> Openings:
        """Both sets (an opening in both: its better cosine, the chunks of both), at most the
        MAX_OPENINGS compared with most chunks."""
        best = dict(self.best)
        for file_id, (cosine, compared) in other.best.items():
            mine = best.get(file_id)
            best[file_id] = (cosine, compared) if mine is None else (max(mine[0], cosine), mine[1] + compared)
        kept = self.kept + other.kept
        if len(best) + len(kept) > MAX_OPENINGS:
            entries = sorted([(-c, 0, f"{i:09d}", ("", (b, c))) for i, (b, c) in enumerate(kept)]
                             + [(-c, 1, f, (f, (b, c))) for f, (b, c) in best.items()])[:MAX_OPENINGS]
            best = {f: value for *_, (f, value) in entries if f}
            kept = tuple(value for *_, (f, value) in entries if not f)
        return Openings(best, kept)

    def compared(self) -> list[tuple[float, int]]:
        return [*self.best.values(), *self.kept]

    def anchor(self) -> float | None:
        """The median best cosine of the openings compared with at least MIN_COMPARED chunks, if
        there are MIN_OPENINGS of them."""
        counted = [cosine for cosine, chunks in self.compared() if chunks >= MIN_COMPARED]
        return statistics.median(counted) if len(counted) >= MIN_OPENINGS else None

    def to_json(self) -> list[float]:
        """The best cosines of those compared with MIN_COMPARED chunks or more: no process
        compares a stored opening again, so the others would never count (rewritten by every
        upload's upkeep, so kept short)."""
        return [round(cosine, 4) for cosine, chunks in self.compared() if chunks >= MIN_COMPARED]

    @classmethod
    def from_json(cls, data: object) -> Openings:
        """`ValueError` if `data` is not `to_json`'s."""
        if not isinstance(data, list):
            raise ValueError("openings are not a list")
        return cls(kept=tuple((float(cosine), MIN_COMPARED) for cosine in data))


@dataclass
class LiveOpenings:
    """The vectors of the openings this process asked for one KB (MAX_OPENINGS at most, one model)."""

    model: str = ""
    vectors: dict[str, np.ndarray] = field(default_factory=dict)

    def wants(self, model: str) -> bool:
        """Whether an upload embedded with `model` should embed its opening too."""
        return model != self.model or len(self.vectors) < MAX_OPENINGS

    def observe(self, model: str, file_id: str, chunk_vectors: np.ndarray, opening: np.ndarray | None) -> Openings:
        """A committed file: its unit `chunk_vectors` compared with the other openings (their best
        cosine, clipped to 0..1 as retrieval's scores), and its `opening`'s vector kept (not
        compared yet). Another model's openings are dropped."""
        if model != self.model:
            self.model, self.vectors = model, {}
        found = {}
        others = [other for other in self.vectors if other != file_id]
        if others and len(chunk_vectors):
            best = np.clip((np.stack([self.vectors[o] for o in others]) @ chunk_vectors.T).max(axis=1), 0.0, 1.0)
            found = {other: (float(cosine), int(chunk_vectors.shape[0])) for other, cosine in zip(others, best)}
        if opening is not None and (file_id in self.vectors or len(self.vectors) < MAX_OPENINGS):
            self.vectors[file_id] = opening
            found.setdefault(file_id, (0.0, 0))
        return Openings(found)
