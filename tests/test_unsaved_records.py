"""A file whose record plugin storage has not taken yet (UNSAVED in lucidrag/state/lifecycle.py)
is answered from the record its ingest made, also once the record cache has let it go: not from
a record rebuilt from its vectors, which Milvus and pgvector strip of headings and titles.

Written against a survivor of a mutation run of lifecycle.py (docs/TESTING.md).
"""

from __future__ import annotations

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from lucidrag.state import recordcache
from tests.conftest import FakePlugin, Harness

KB = "kb-unsaved"
MANUAL = b"# Pump manual\n\n## Filters\n\nReplace the intake filter every 90 days.\n"
TEA = b"# Tea notes\n\nOolong tea is partially oxidised. Tieguanyin comes from Anxi in Fujian.\n"


async def test_an_unsaved_file_evicted_from_the_record_cache_keeps_its_heading_and_title(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(recordcache, "CACHE_BYTES", 1)  # the cache keeps only the latest record
    host = FakePlugin.milvus()  # keeps only text, file_id and uuid with each vector
    harness = Harness(host)
    await harness.ingest(KB, "first.txt", b"A first file, so that plugin storage names files.")
    host.fail("set_plugin_storage", when=lambda key, **_: "/file/" in key)  # records are not taken
    manual = await harness.ingest(KB, "manual.md", MANUAL)
    tea = await harness.ingest(KB, "tea.md", TEA)  # its record pushes the manual's out of the cache
    assert manual.status == tea.status == DocumentStatus.COMPLETED
    top = (await harness.retrieve(KB, "How often is the intake filter replaced?")).results[0]
    assert "90 days" in top.content[0].text
    assert top.metadata["heading"] == "Pump manual › Filters"
    assert top.metadata["document_name"] == "Pump manual"
