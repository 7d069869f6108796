"""Host round trips of ingest / re-upload / retrieve / delete, and chunk boundaries of two samples.

    .venv/bin/python bench/bench_ingest.py

Runs the real component against tests/fakes.py (which follows HOST_CONTRACT.md) and prints the
number of host calls per operation: stable numbers, unlike wall-clock times.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lucidrag.base.settings import parse_creation_settings  # noqa: E402
from lucidrag.ingestion.chunking import chunk_document  # noqa: E402
from lucidrag.ingestion.parsing import parse_file  # noqa: E402
from tests.conftest import FakePlugin, Harness  # noqa: E402

KB = "bench-kb"
ZH_SAMPLE = (
    "# 员工手册\n\n## 考勤制度\n\n公司实行弹性工作制，核心工作时间为上午十点至下午四点。员工每月可申请两次远程办公；"
    "远程办公需提前一天在系统中提交申请。迟到超过三十分钟按事假半天处理！如遇特殊情况，请及时联系直属主管。\n\n"
    "## 报销流程\n\n差旅费用须在出差结束后十五个工作日内提交报销单。单笔超过五千元的费用需要部门负责人审批？"
    "发票抬头必须为公司全称，税号填写完整。电子发票与纸质发票具有同等效力。报销款项将在审批通过后五个工作日内到账。\n"
) * 3
EN_SAMPLE = (
    "# Operator Guide\n\n## Installing\n\nDownload the installer from the releases page. Run it as an administrator. "
    "The installer checks the Python version and creates a virtual environment. If the check fails, install Python "
    "3.11 and try again.\n\n## Upgrading\n\nStop the service before upgrading. Back up the data folder, which holds "
    "the database and uploaded files. Then run the installer again; it keeps your settings. After the upgrade, open "
    "the web UI and confirm that the version number in the footer changed.\n"
) * 3


def two_hundred_chunk_document() -> bytes:
    paragraph = ("Part PX-{i} is a stainless bracket used in assembly line {line}. It weighs {w} grams, is rated for "
                 "{load} kilograms and ships from warehouse {wh}. Inspect it every {days} days for corrosion and "
                 "replace it when cracks appear near the mounting holes. ")
    text = "\n\n".join(paragraph.format(i=i, line=i % 7, w=i * 3, load=i % 50, wh=i % 9, days=30 + i % 60) * 2
                       for i in range(200))
    return text.encode()


async def measure() -> None:
    host = FakePlugin()
    harness = Harness(host)
    data = two_hundred_chunk_document()
    await harness.create(KB)

    def snapshot() -> Counter[str]:
        return Counter(host.calls)

    rows = []
    for label, op in [
        ("first upload (200-chunk txt)", lambda: harness.ingest(KB, "parts.txt", data)),
        ("re-upload of the same file", lambda: harness.ingest(KB, "parts-copy.txt", data)),
        ("first retrieve (loads KB state)", lambda: harness.retrieve(KB, "bracket PX-42 weight")),
        ("retrieve (hybrid)", lambda: harness.retrieve(KB, "which warehouse ships PX-77?")),
        ("retrieve (hybrid, context_window=2)", lambda: harness.retrieve(KB, "PX-77", settings={"context_window": 2})),
    ]:
        before = snapshot()
        start = time.perf_counter()
        result = await op()
        elapsed = time.perf_counter() - start
        delta = snapshot() - before
        chunks = getattr(result, "chunks_created", None)
        rows.append((label, sum(delta.values()), dict(delta), chunks, elapsed))
    doc_id = next(iter({m["file_id"] for m in host.vectors_of(KB)}))
    before = snapshot()
    await harness.component.delete_document(KB, doc_id)
    rows.append(("delete_document", sum((snapshot() - before).values()), dict(snapshot() - before), None, 0.0))
    before = snapshot()
    await harness.component.on_knowledge_base_delete(KB)
    rows.append(("on_knowledge_base_delete", sum((snapshot() - before).values()), dict(snapshot() - before), None, 0.0))

    print("## Host calls per operation (fake host following HOST_CONTRACT.md)\n")
    print("| operation | chunks | host calls | breakdown |")
    print("|---|---|---|---|")
    for label, total, delta, chunks, _ in rows:
        detail = ", ".join(f"{k} {v}" for k, v in sorted(delta.items()))
        print(f"| {label} | {chunks if chunks is not None else ''} | {total} | {detail} |")
    print(f"\nembedded texts in total: {host.embedded_texts} (the re-upload embedded none)")


def boundaries() -> None:
    settings = parse_creation_settings({"embedding_model_uuid": "m", "chunk_size": 80, "chunk_overlap": 0})
    for name, text in (("Chinese sample", ZH_SAMPLE), ("English sample", EN_SAMPLE)):
        document = parse_file(text.encode(), "sample.md")
        chunks = chunk_document(document, settings).chunks
        print(f"\n## {name}: {len(text)} characters → {len(chunks)} chunks (chunk_size=80, overlap=0)\n")
        for chunk in chunks[:6]:
            body = chunk.text.replace("\n", " ")
            print(f"- [{chunk.heading}] {len(chunk.text):3d} chars: …{body[-28:]!r}")


if __name__ == "__main__":
    asyncio.run(measure())
    boundaries()
