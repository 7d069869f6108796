"""What the console page sends is untrusted: every number is clamped to its range or its default
and every file id is checked before it names a storage key -- never an "Unexpected error"."""

from __future__ import annotations

import json
import random
import string
from typing import Any

import pytest

from lucidrag.state.storage_keys import file_record_key
from tests.conftest import Harness
from tests.test_console import KB, SOLAR, api, create_kb, host, page  # noqa: F401 - fixtures

# What JSON (as Python's reader takes it: 1e400 is infinity, NaN is accepted) can put in a number
BAD_NUMBERS: list[Any] = [json.loads("1e400"), json.loads("-1e400"), float("nan"), -1, 0, 10**40, -(10**40),
                          "abc", "7", "1e400", "9" * 5000, True, False, None, [], {}, 2.7]


@pytest.mark.parametrize("value", BAD_NUMBERS, ids=repr)
async def test_every_number_the_console_takes_is_clamped_never_an_error(harness: Harness, host, page, value):
    await create_kb(harness, host)
    await harness.ingest(KB, "solar.txt", SOLAR, document_id="solar")
    chunks = await api(page, "/chunks", kb_id=KB, file_id="solar", offset=value, limit=value)
    assert "error" not in chunks, chunks
    assert 0 <= chunks["offset"] <= chunks["total"] and len(chunks["chunks"]) <= 200
    hits = await api(page, "/search", kb_id=KB, query="solar array kilowatts", top_k=value)
    assert "error" not in hits, hits
    assert [h["file_id"] for h in hits["hits"]] == ["solar"]


async def test_numbers_in_range_are_taken_and_out_of_range_ones_clamped(harness: Harness, host, page):
    await create_kb(harness, host)
    long_text = " ".join(f"Paragraph {n} tells about the solar array on roof {n}." * 8 for n in range(60)).encode()
    await harness.ingest(KB, "long.txt", long_text, document_id="long")
    total = (await api(page, "/chunks", kb_id=KB, file_id="long"))["total"]
    assert total > 3
    assert [c["index"] for c in (await api(page, "/chunks", kb_id=KB, file_id="long", offset=1, limit=2))["chunks"]] == [1, 2]
    assert (await api(page, "/chunks", kb_id=KB, file_id="long", offset="2", limit=1))["offset"] == 2
    assert (await api(page, "/chunks", kb_id=KB, file_id="long", offset=10**40))["offset"] == total
    assert len((await api(page, "/chunks", kb_id=KB, file_id="long", limit=10**40))["chunks"]) == min(total, 200)
    assert len((await api(page, "/search", kb_id=KB, query="solar array roof", top_k=2))["hits"]) == 2


@pytest.mark.parametrize("bad", ["{F}#0", "{F}/x", "../{F}", "#", "/"])
async def test_a_file_id_that_would_name_another_key_is_refused_and_nothing_changes(harness: Harness, host, page, bad):
    await create_kb(harness, host)
    # a record big enough to be stored in parts (<key>#0, #1, ...): text zlib cannot shrink much
    rng = random.Random(7)
    big = " ".join("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9))) for _ in range(30000))
    stored = await harness.ingest(KB, "inventory.txt", big.encode())
    record_key = file_record_key(KB, stored.document_id)
    assert f"{record_key}#0" in host.storage
    before = dict(host.storage)
    file_id = bad.format(F=stored.document_id)
    for body in ({"action": "remove_orphan_vectors", "file_id": file_id},
                 {"action": "remove_orphan_vectors", "file_id": file_id, "langbot_status": "interrupted"}):
        refused = await api(page, "/repair", kb_id=KB, **body)
        assert "contain no '/' or '#'" in refused["error"] and "Nothing was changed" in refused["error"]
    assert "contain no '/' or '#'" in (await api(page, "/chunks", kb_id=KB, file_id=file_id))["error"]
    assert host.storage == before
    chunks = await api(page, "/chunks", kb_id=KB, file_id=stored.document_id)
    assert chunks["total"] > 0 and "error" not in chunks


async def test_a_file_id_that_is_not_text_is_refused(harness: Harness, host, page):
    await create_kb(harness, host)
    for value in (1e400, 12, ["a"], {"a": 1}):
        refused = await api(page, "/repair", kb_id=KB, action="remove_orphan_vectors", file_id=value)
        assert "is not a file id" in refused["error"]
    assert "Choose the file" in (await api(page, "/repair", kb_id=KB, action="remove_orphan_vectors"))["error"]
