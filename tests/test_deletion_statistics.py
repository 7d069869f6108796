"""A deleted file leaves the keyword index: its chunks no longer count in N (chunks) or in a
term's document frequency, so the ranking a user sees (the idf-weighted query-term coverage each
keyword hit reports, and hybrid fusion built on it) is the same as if the file had never been
uploaded -- in this process and after a restart from the persisted snapshot."""

from __future__ import annotations

import pytest

from lucidrag.index.segindex import SegmentIndex
from lucidrag.state.store import KbStore, unpack_segment
from tests.conftest import FakePlugin, Harness
from tests.test_state_runtime import restarted

KB = "kb-stats"
ALPHA = b"Alpha valves are serviced on Mondays."
BETA = b"Beta pumps are serviced on Fridays."
NOISE = b"Alpha alpha alpha: the alpha crew keeps spare alpha gaskets."
QUERY = "alpha beta"


def state_of(harness: Harness):
    return harness.host.engine.installation("dedicated").kb(KB)


async def ranking(harness: Harness) -> list[tuple[str, float | None]]:
    response = await harness.retrieve(KB, QUERY, settings={"search_mode": "keyword", "top_k": 10, "source_line": False})
    return [(entry.content[0].text, entry.score) for entry in response.results]


async def persisted_index(host: FakePlugin) -> SegmentIndex:
    store = KbStore(host, KB)
    manifest = await store.load_index_manifest()
    assert manifest is not None
    names = SegmentIndex.manifest_segment_names(manifest)
    return SegmentIndex.load(manifest, {n: unpack_segment(await store.load_index_segment(n)) for n in names})


def statistics(index: SegmentIndex) -> tuple[int, int, int, set[int]]:
    return (len(index), index.document_frequency("alpha"), index.document_frequency("beta"),
            {index.chunk_count(f) for f in index.file_ids()})


@pytest.mark.usefixtures("persist_every_segment")
async def test_a_deleted_file_no_longer_counts_in_the_keyword_statistics_or_the_ranking():
    never = Harness(FakePlugin())
    for name, data in (("alpha.txt", ALPHA), ("beta.txt", BETA)):
        await never.ingest(KB, name, data)

    host = FakePlugin()
    harness = Harness(host)
    await harness.ingest(KB, "alpha.txt", ALPHA)
    noise = await harness.ingest(KB, "noise.txt", NOISE)
    await harness.ingest(KB, "beta.txt", BETA)
    with_noise = await ranking(harness)
    assert await harness.component.delete_document(KB, noise.document_id)

    assert noise.document_id not in state_of(harness).index
    assert statistics(state_of(harness).index) == statistics(state_of(never).index) == (2, 1, 1, {1})
    expected = await ranking(never)
    assert await ranking(harness) == expected
    assert with_noise != expected, "the deleted file did change the scores while it was there"

    snapshot = await persisted_index(host)
    assert noise.document_id not in snapshot
    assert statistics(snapshot) == statistics(state_of(never).index)
    assert await ranking(restarted(host)) == expected
