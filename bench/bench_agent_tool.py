"""How long an agent's tool call takes next to the retrieve LangBot makes before every answer.

    .venv/bin/python bench/bench_agent_tool.py [--queries 300] [--files 100] [--latency-ms 2]

One KB of --files text files on the fake host (tests/fakes.py), every host call taking
--latency-ms, the tools' two LangBot actions (LIST_PIPELINE_KNOWLEDGE_BASES, RETRIEVE_KNOWLEDGE_
BASE) included (fakes.QueryScopedActions). Round-robin over: the component's retrieve hook alone
(what the automatic retrieval costs the plugin), lucidrag_search without a filter, with a file id,
with a file title (the records of every file scanned for it, cached after the first), with a
format, lucidrag_list_files, lucidrag_read_around. Prints p50 / p95 / p99 of each call's wall time
and the host calls one of each makes. Asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from components.tools.kb_tools import ListKnowledgeBaseFiles, ReadAroundPassage, SearchKnowledgeBase  # noqa: E402
from lucidrag.state.querystats import percentile  # noqa: E402
from tests.conftest import FakePlugin, Harness, runtime_loop  # noqa: E402

KB = "bench-agent-tool"
WORDS = ("pump valve seal bearing torque bolt gasket filter motor belt sensor relay fuse cable "
         "inspect replace tighten clean log shift weekly monthly pressure flow noise heat").split()


def document(n: int, rng: random.Random) -> bytes:
    title = f"Maintenance manual {n}"
    return (title + "\n\n" + "\n\n".join(f"Section {n}.{i}: " + " ".join(rng.choice(WORDS) for _ in range(60))
                                         for i in range(12))).encode()


async def main(queries: int, files: int, latency_ms: float) -> None:
    rng = random.Random(7)
    host = FakePlugin(latency=latency_ms / 1000.0)
    harness = Harness(host)
    await harness.create(KB)
    ids = [(await harness.ingest(KB, f"f{n}.txt", document(n, rng))).document_id for n in range(files)]
    harness.knowledge_base_in_langbot(KB, "Manuals")
    assert host.queries is not None
    query = host.queries.start_query([KB])

    def tool(component: object, params: dict[str, object]) -> Callable[[], Awaitable[object]]:
        return lambda: harness.call_tool(component, params, query.query_id, query.query_uuid)  # type: ignore[arg-type]

    questions = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) + "?" for _ in range(queries)]
    first = (await tool(SearchKnowledgeBase(), {"query": questions[0]})())["passages"][0]["id"]  # type: ignore[index]

    def calls(question: str) -> dict[str, Callable[[], Awaitable[object]]]:
        return {
            "retrieve hook": lambda: harness.retrieve(KB, question),
            "search": tool(SearchKnowledgeBase(), {"query": question}),
            "search, file id": tool(SearchKnowledgeBase(), {"query": question, "file": rng.choice(ids)}),
            "search, file title": tool(SearchKnowledgeBase(), {"query": question,
                                                               "file": f"Maintenance manual {rng.randrange(files)}"}),
            "search, format": tool(SearchKnowledgeBase(), {"query": question, "format": "text"}),
            "list files": tool(ListKnowledgeBaseFiles(), {"name_contains": "manual 1"}),
            "read around": tool(ReadAroundPassage(), {"passage_id": first, "before": 2, "after": 2}),
        }

    for question in questions[:20]:  # warm-up: caches, the first listing
        for run in calls(question).values():
            await run()
    took: dict[str, list[float]] = {}
    for question in questions:
        for name, run in calls(question).items():
            started = time.perf_counter()
            await run()
            took.setdefault(name, []).append((time.perf_counter() - started) * 1000.0)
    print(f"{files} files, {queries} calls of each, host calls {latency_ms} ms each")
    for name, values in took.items():
        p50, p95, p99 = (percentile(values, p) for p in (50, 95, 99))
        before = host.calls.copy()
        await calls(questions[0])[name]()
        made = sum((host.calls - before).values())
        print(f"  {name:<19} p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  p99 {p99:6.2f} ms  host calls {made}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--latency-ms", type=float, default=2.0)
    args = parser.parse_args()
    loop = runtime_loop()
    loop.run_until_complete(main(args.queries, args.files, args.latency_ms))
