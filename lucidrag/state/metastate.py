"""What this process knows of a KB's meta in plugin storage and of its vector collection, and the
one owner of that knowledge.

The meta (`store.KbMeta`: the distance metric, and whether the KB ever had a vector) is written
at KB creation with the mark "no vector yet", and again after the first upsert. Four small
machines, each with named states; every change is one method here:

```
mark (whether the KB ever had a vector, what this process knows best):
    UNKNOWN ──read / learnt──► NONE_YET ──first_vectors / metric_learnt / records_found / vectors_found──► SOME
       └──────────────── first_vectors / read "vectors" / records_found / vectors_found ─────────┘
collection (whether the vector DB holds the KB's collection):
    EXISTS ──may_be_missing (the load: the mark says NONE_YET, or storage says nothing)──► UNKNOWN
                                                   UNKNOWN ◄──(the mark changes)──► ABSENT
    UNKNOWN / ABSENT ──exists (first vectors written; the probe; the meta read "vectors")──► EXISTS
stored content (what the stored meta says):
    NOT_READ ──read──► SAYS_EMPTY | SAYS_NOT_EMPTY ◄──saved── any
    NOT_READ ──unreadable──► UNREADABLE ──read (a later hook)──► SAYS_…
    UNREADABLE ──listed, not stored──► NOT_READ
stored presence (whether storage holds the meta at all):
    UNKNOWN ──listed / read / saved──► PRESENT | ABSENT       ABSENT ──saved──► PRESENT
write: CLEAN ──save failed──► DIRTY ──saved──► CLEAN
```

EXISTS before the load means only that nothing says the collection may be missing: a KB that
may never have had a vector is loaded before anything touches its vectors. While the collection
is UNKNOWN or ABSENT nothing may touch the vector DB but an upsert of the model's vectors (an
ingest's, or `KnowledgeBaseState.open_collection`'s probe): LangBot's Milvus adapter creates a
missing collection with dimension 1536 on any search, list or delete, which then refuses every
vector of another dimension.
"""

from __future__ import annotations

from enum import Enum

from lucidrag.state.store import KbMeta
from lucidrag.state.transitions import require
from lucidrag.vectors.scoring import Metric


class Mark(Enum):
    UNKNOWN = "not known whether the KB ever had a vector"
    NONE_YET = "the KB never had a vector"
    SOME = "the KB has had vectors"


class Collection(Enum):
    EXISTS = "nothing says the collection may be missing"
    UNKNOWN = "the collection may be missing"
    ABSENT = "the KB never had a vector: no collection to touch"


class StoredContent(Enum):
    NOT_READ = "not read"
    UNREADABLE = "stored (or may be) but could not be read: it may say 'no vector yet'"
    SAYS_EMPTY = "says 'no vector yet': a restart neither lists the vector DB nor adopts journal entries"
    SAYS_NOT_EMPTY = "says the KB has had vectors, or nothing"


class Presence(Enum):
    UNKNOWN = "not known whether storage holds the meta"
    PRESENT = "storage holds the meta"
    ABSENT = "storage holds no meta (its write at creation failed, or storage was lost)"


_MARKS = {None: Mark.UNKNOWN, False: Mark.NONE_YET, True: Mark.SOME}


class MetaState:
    def __init__(self) -> None:
        self.metric: Metric | None = None
        self.mark = Mark.UNKNOWN
        self.collection = Collection.EXISTS
        self.content = StoredContent.NOT_READ
        self.presence = Presence.UNKNOWN
        self.dirty = False  # DIRTY: the meta still has to be written

    # ------------------------------------------------------------------ reads
    @property
    def has_vectors(self) -> bool | None:
        return {Mark.UNKNOWN: None, Mark.NONE_YET: False, Mark.SOME: True}[self.mark]

    @property
    def fresh(self) -> bool:
        """The collection may not exist (UNKNOWN or ABSENT)."""
        return self.collection is not Collection.EXISTS

    @property
    def never_had_vectors(self) -> bool:
        return self.collection is Collection.ABSENT

    @property
    def unreadable(self) -> bool:
        return self.content is StoredContent.UNREADABLE

    @property
    def may_say_empty(self) -> bool:
        """The stored meta says (or may say) "never had a vector"."""
        return self.content in (StoredContent.SAYS_EMPTY, StoredContent.UNREADABLE)

    @property
    def metric_may_be_stored(self) -> bool:
        """Storage may hold a measured metric this process could not read: a save of `to_save()`
        would write `metric: null` over it."""
        return (self.metric is None and self.presence is not Presence.ABSENT
                and self.content in (StoredContent.NOT_READ, StoredContent.UNREADABLE))

    def to_save(self) -> KbMeta:
        return KbMeta(self.metric, self.has_vectors)

    # ------------------------------------------------------------------ transitions
    def _set_mark(self, mark: Mark) -> None:
        self.mark = mark
        if self.collection is not Collection.EXISTS:
            self.collection = Collection.ABSENT if mark is Mark.NONE_YET else Collection.UNKNOWN

    def created(self) -> None:
        """The KB was created by this process: it has no vector yet (unless learnt otherwise)."""
        if self.mark is Mark.UNKNOWN:
            self._set_mark(Mark.NONE_YET)

    def learnt(self, has_vectors: bool | None) -> None:
        """Another reader of the stored meta: what this process learnt itself is newer."""
        if self.mark is Mark.UNKNOWN:
            self._set_mark(_MARKS[has_vectors])

    def read(self, meta: KbMeta) -> None:
        """The stored meta was read: NOT_READ / UNREADABLE -> SAYS_…, presence PRESENT; a
        collection whose KB the meta does not say is empty exists."""
        self.content = (StoredContent.SAYS_EMPTY if meta.has_vectors is False and self.mark is not Mark.SOME
                        else StoredContent.SAYS_NOT_EMPTY)
        self.presence = Presence.PRESENT
        self.metric = self.metric or meta.metric
        self.learnt(meta.has_vectors)
        if self.collection is not Collection.EXISTS and self.mark is not Mark.NONE_YET:
            self.exists()  # (and storage is not empty: nothing to look for in the vector DB)

    def unreadable_at_open(self, listed: bool | None) -> None:
        """The meta could not be read at the load (`listed`: whether a listing shows it; None: the
        listing failed too): -> UNREADABLE, or (not listed) presence ABSENT."""
        if listed is False:
            self.presence, self.content = Presence.ABSENT, StoredContent.NOT_READ
            return
        self.content = StoredContent.UNREADABLE
        if listed:
            self.presence = Presence.PRESENT

    def listed(self, has_meta: bool) -> None:
        """A storage listing showed (or did not show) the meta: settles an UNKNOWN presence. A meta
        that could not be read and is not stored says nothing (UNREADABLE -> NOT_READ, as
        `unreadable_at_open` on a listing without it): it cannot say "never had a vector"."""
        if self.presence is Presence.UNKNOWN:
            self.presence = Presence.PRESENT if has_meta else Presence.ABSENT
            if not has_meta and self.content is StoredContent.UNREADABLE:
                self.content = StoredContent.NOT_READ

    def records_found(self) -> None:
        """A listing shows records of the KB: it has had vectors (a commit writes its record after
        them), whatever the stored mark says (a late write of "no vector yet", given up on at the
        KB's creation, may land after the first upsert's): SOME, and the meta is to be written."""
        self.vectors_found()

    def vectors_found(self) -> None:
        """The KB has had vectors (records, or other files' vectors, were found), whatever the
        stored mark says: SOME, and the meta is to be written."""
        if self.mark is not Mark.SOME:
            self._set_mark(Mark.SOME)
            self.dirty = True

    def found_stored(self) -> None:
        """A listing shows the meta stored (a save this process was told failed landed after all):
        presence PRESENT; what it says is read at the next load."""
        self.presence = Presence.PRESENT

    def saved(self, ok: bool) -> None:
        """A write of `to_save()` ended: CLEAN with presence PRESENT, or DIRTY."""
        self.dirty = not ok
        if ok:
            self.presence = Presence.PRESENT
            self.content = StoredContent.SAYS_EMPTY if self.mark is Mark.NONE_YET else StoredContent.SAYS_NOT_EMPTY

    def stored_at_creation(self, ok: bool) -> None:
        """The creation hook's write of "no vector yet" ended."""
        if ok:
            self.presence = Presence.PRESENT
        else:
            self.dirty = True

    def may_be_missing(self) -> None:
        """The load found no file: EXISTS -> ABSENT (the mark says NONE_YET) or UNKNOWN."""
        require("meta", self.collection, (Collection.EXISTS,), "may_be_missing")
        self.collection = Collection.ABSENT if self.mark is Mark.NONE_YET else Collection.UNKNOWN

    def exists(self) -> None:
        """-> EXISTS: the collection exists (vectors were written, the probe, the meta read)."""
        self.collection = Collection.EXISTS

    def first_vectors(self) -> bool:
        """Vectors were written: the collection EXISTS, the mark is SOME. Whether the meta is to be
        written (the mark changed)."""
        self.exists()
        if self.mark is Mark.SOME:
            return False
        self._set_mark(Mark.SOME)
        return True

    def metric_learnt(self, metric: Metric) -> None:
        self.metric = metric
        self._set_mark(Mark.SOME)
