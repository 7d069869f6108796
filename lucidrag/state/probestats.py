"""A KB's probe statistics: how close its embedding model puts unrelated questions to its passages.

For each probe (index/probes.py: everyday questions no operator's files answer) the best cosine
over every chunk ingested into the KB, a running maximum kept while files are ingested: the
chunks' vectors are in hand then, so it costs no vector search and no host call of its own: the
probes ride in the embedding batches of a process's uploads until one per model has committed
(engine.py), then a small matrix product per file. The relevance cut
(retrieval/relevance.py) compares a question's best cosine with the median of these maxima over
the probes of the question's language. The same value keeps the KB's openings
(state/openingstats.py: its first files' opening sentences compared with later files' chunks,
the anchor), so reading both is one storage read.

Bookkeeping, like the query log (base/bookkeeping.py): a storage failure raises
ProbeStatsStorageFailed, which the engine counts and logs; an ingest or a question never fails for
it. It is kept apart from the KB's state records (one value, storage_keys.probe_stats_key), read
once per process (the first question of the KB, or the first save), merged in memory when a file
commits (no host call: the ingest returns as before) and written by the upkeep of the next upload,
file deletion or KB creation (engine.py), before that hook's own work; a question writes nothing.
A restart before then loses them (the maxima are then a little low, or below COVERAGE). Only committed files count. Deleting a file leaves the
maxima as they are: they can only be stale upwards (the cut then weighs a question against a
background a little too high). The maxima are used only while they were taken over at least
COVERAGE of the chunks the KB's keyword index holds, and at least MIN_CHUNKS: a KB ingested
before they existed, one whose statistics were lost, or whose model changed, gets the cut without
them.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from lucidrag.base.host import HostApi
from lucidrag.index.probes import LANGUAGES, PROBES, Language
from lucidrag.state.openingstats import LiveOpenings, Openings
from lucidrag.state.storage_keys import probe_stats_key
from lucidrag.state.store import StorageReadFailed, put_value, read_value

MIN_CHUNKS = 20  # fewer chunks give maxima too low to stand for the model's background
# Share of the KB's chunks the maxima must have been taken over: a file whose maxima a crash lost
# before they were saved leaves them a little low (a background too low cuts less), a KB ingested
# before they existed leaves them far too few.
COVERAGE = 0.9
READ_RETRY_S = 60.0  # after a failed read, questions do without the statistics this long
_FORMAT = 1


class ProbeStatsStorageFailed(Exception):
    """Plugin storage refused to read or write a KB's probe statistics."""


@dataclass(frozen=True)
class ProbeMaxima:
    model: str  # the embedding model the maxima were measured with
    chunks: int  # chunks they were taken over
    maxima: dict[Language, tuple[float, ...]]  # per language, per probe (PROBES' order)
    openings: Openings = field(default_factory=Openings)  # the KB's own side (state/openingstats.py)

    def merged(self, other: ProbeMaxima) -> ProbeMaxima:
        """Both sets' maxima and openings; a different model's replace these."""
        if other.model != self.model:
            return other
        return ProbeMaxima(self.model, self.chunks + other.chunks,
                           {lang: tuple(map(max, self.maxima[lang], other.maxima[lang])) for lang in LANGUAGES},
                           self.openings.merged(other.openings))

    def encode(self) -> bytes:
        return json.dumps({"v": _FORMAT, "model": self.model, "chunks": self.chunks,
                           "max": {lang: [round(x, 4) for x in self.maxima[lang]] for lang in LANGUAGES},
                           "openings": self.openings.to_json()}, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, blob: bytes) -> ProbeMaxima:
        """`ValueError` if `blob` is not encoded probe maxima of this format."""
        try:
            data = json.loads(blob)
            maxima = {lang: tuple(float(x) for x in data["max"][lang]) for lang in LANGUAGES}
            if data["v"] != _FORMAT or any(len(maxima[lang]) != len(PROBES[lang]) for lang in LANGUAGES):
                raise ValueError("another format")
            openings = Openings.from_json(data.get("openings", []))  # none in a value saved before them
            return cls(str(data["model"]), int(data["chunks"]), maxima, openings)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(f"not probe statistics ({error})") from None


def maxima_of(model: str, chunk_vectors: np.ndarray, probe_vectors: np.ndarray,
              openings: Openings | None = None) -> ProbeMaxima:
    """Each probe's best cosine (clipped to 0..1, as retrieval's scores) over unit `chunk_vectors`;
    `probe_vectors`: the unit vectors of every language's PROBES, in LANGUAGES' order; with the
    `openings` the same chunks were compared with (LiveOpenings.observe)."""
    best = np.clip((probe_vectors @ chunk_vectors.T).max(axis=1), 0.0, 1.0).tolist()
    maxima: dict[Language, tuple[float, ...]] = {}
    start = 0
    for lang in LANGUAGES:
        maxima[lang] = tuple(best[start : start + len(PROBES[lang])])
        start += len(PROBES[lang])
    return ProbeMaxima(model, int(chunk_vectors.shape[0]), maxima, openings or Openings())


@dataclass(frozen=True)
class Background:
    """What a question's best cosine is weighed against (retrieval/relevance.py)."""

    probes: float  # the median of the probe maxima of the question's language
    anchor: float | None  # the median of the openings' (Openings.anchor), if known and above `probes`


@dataclass
class ProbeStats:
    """One KB's probe maxima: those stored (once read) merged with those of this process's ingests."""

    kb_id: str
    seen: ProbeMaxima | None = None
    read: bool = False  # the stored value was read (or is known to be missing)
    closed: bool = False  # the KB was deleted: nothing is written any more
    dirty: bool = False  # maxima observed that storage does not hold yet
    live: LiveOpenings = field(default_factory=LiveOpenings)  # this process's openings' vectors
    _retry_at: float = 0.0  # monotonic time before which a question does not read it again
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def observe(self, added: ProbeMaxima) -> None:
        """Merge one committed file's maxima (no I/O: `save` writes them)."""
        if not self.closed:
            self.seen = added if self.seen is None else self.seen.merged(added)
            self.dirty = True

    async def save(self, host: HostApi) -> None:
        """Write the maxima, merged with those stored (ProbeStatsStorageFailed: they stay in memory
        and unsaved, for a later try)."""
        async with self._lock:
            if self.closed or not self.dirty or self.seen is None:
                return
            await self._read(host)
            self.dirty = False
            if not await put_value(host, probe_stats_key(self.kb_id), self.seen.encode(), "probe statistics"):
                self.dirty = True
                raise ProbeStatsStorageFailed(f"plugin storage refused to save kb={self.kb_id}'s probe statistics")

    async def background(self, host: HostApi, model: str, language: Language, kb_chunks: int) -> Background | None:
        """The median of `language`'s probe maxima (and the openings' anchor), if they were
        measured with `model` over at least COVERAGE × `kb_chunks` (the KB's chunks now) and
        MIN_CHUNKS chunks; else None. Reads the stored value the first time
        (ProbeStatsStorageFailed: tried again after READ_RETRY_S)."""
        if not self.read and time.monotonic() >= self._retry_at:
            async with self._lock:
                try:
                    await self._read(host)
                except ProbeStatsStorageFailed:
                    self._retry_at = time.monotonic() + READ_RETRY_S
                    raise
        stats = self.seen
        if not self.read or stats is None or stats.model != model or stats.chunks < max(MIN_CHUNKS, COVERAGE * kb_chunks):
            return None
        probes = statistics.median(stats.maxima[language])
        anchor = stats.openings.anchor()
        return Background(probes, anchor if anchor is not None and anchor > probes else None)

    async def close(self, drain_s: float) -> bool:
        """Write nothing from now on; False if a write under way did not end within `drain_s`."""
        self.closed = True
        try:
            await asyncio.wait_for(self._lock.acquire(), drain_s)
        except TimeoutError:
            return False
        self._lock.release()
        return True

    async def _read(self, host: HostApi) -> None:
        if self.read:
            return
        try:
            blob = await read_value(host, probe_stats_key(self.kb_id))
        except StorageReadFailed as error:
            raise ProbeStatsStorageFailed(f"plugin storage could not read kb={self.kb_id}'s probe statistics "
                                          f"({error})") from error
        if blob is not None:
            try:
                stored = ProbeMaxima.decode(blob)
            except ValueError:
                stored = None  # unreadable: measured afresh (used once they cover the KB again)
            if stored is not None:
                self.seen = stored if self.seen is None else stored.merged(self.seen)
        self.read = True
