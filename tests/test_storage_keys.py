"""LucidRAG's keys in plugin storage (lucidrag/state/storage_keys.py), as the console counts them
and as a KB delete finds them: files whose records are stored in parts count once, a KB whose meta
could not be written is still listed, and deleting every KB leaves plugin storage empty.

Written against the survivors of a mutation run of storage_keys.py (docs/TESTING.md).
"""

from __future__ import annotations

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

from components.pages.console.console import LucidRagConsole
from lucidrag.state.storage_keys import file_record_key
from tests import samples
from tests.conftest import Harness
from tests.test_console import ConsoleHost, api, create_kb

KB, OTHER = "kb-keys-1", "kb-keys-2"


def manual(paragraphs: int) -> bytes:
    return "\n\n".join(f"Valve VX-{i} of the cooling loop is opened {i % 9 + 1} turns." for i in range(paragraphs)).encode()


async def test_the_console_counts_each_file_once_also_when_its_record_is_stored_in_parts(monkeypatch):
    monkeypatch.setattr("lucidrag.state.store.PART_SIZE", 256)
    host = ConsoleHost()
    harness = Harness(host)
    page = LucidRagConsole()
    page.plugin = host  # type: ignore[assignment]
    await create_kb(harness, host, KB, "Valves")
    big = await harness.ingest(KB, "valves.txt", manual(60), settings={"chunk_size": 128, "chunk_overlap": 0})
    await harness.ingest(KB, "small.txt", b"The pump is grey.")
    failed = await harness.ingest(KB, "locked.pdf", samples.encrypted_pdf_bytes())
    assert failed.status == DocumentStatus.FAILED
    assert len([k for k in host.storage if k.startswith(file_record_key(KB, big.document_id))]) > 2  # in parts
    (row,) = (await api(page, "/overview"))["knowledge_bases"]
    assert (row["kb_id"], row["files"], row["failed"], row["interrupted"]) == (KB, 2, 1, 0)


async def test_a_kb_whose_meta_and_settings_could_not_be_stored_is_still_listed_by_the_console():
    host = ConsoleHost()
    harness = Harness(host)
    page = LucidRagConsole()
    page.plugin = host  # type: ignore[assignment]
    host.fail("set_plugin_storage", when=lambda key, **_: key.endswith(("/meta", "/settings")))
    await create_kb(harness, host, KB, "Valves")
    await harness.ingest(KB, "small.txt", b"The pump is grey.")
    assert not any(k.endswith(("/meta", "/settings")) for k in host.storage)
    listed = [(kb["kb_id"], kb["files"]) for kb in (await api(page, "/overview"))["knowledge_bases"]]
    assert listed == [(KB, 1)]


@pytest.mark.usefixtures("persist_every_segment")
async def test_deleting_every_kb_leaves_plugin_storage_empty(harness: Harness, host):
    for kb in (KB, OTHER):
        await harness.ingest(kb, "valves.txt", manual(20), settings={"chunk_size": 128, "chunk_overlap": 0})
        await harness.ingest(kb, "small.txt", b"The pump is grey.")
        assert "VX-4" in " ".join(await harness.texts(kb, "valve VX-4", settings={"search_mode": "keyword"}))
    assert any("/kw/" in k for k in host.storage), "the keyword index was persisted"
    await harness.component.on_knowledge_base_delete(KB)
    assert "VX-4" in " ".join(await harness.texts(OTHER, "valve VX-4", settings={"search_mode": "keyword"}))
    await harness.component.on_knowledge_base_delete(OTHER)
    assert host.storage == {}
