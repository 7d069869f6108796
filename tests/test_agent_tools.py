"""The agent's tools (components/tools, lucidrag/agent): what they may see, the filters they
build, what they answer. Driven as the SDK's CALL_TOOL handler drives a Tool, on the fake host's
query-scoped actions (fakes.QueryScopedActions: LangBot 4.11.2's LIST_PIPELINE_KNOWLEDGE_BASES and
RETRIEVE_KNOWLEDGE_BASE), retrieving through the real component's retrieve hook.

The scoping rule under test (lucidrag/agent/scope.py): allowed = the host's KBs for the calling
query ∩ this installation's LucidRAG KBs; anything else is refused, with the same answer whether
the thing named exists elsewhere or nowhere.
"""

from __future__ import annotations

import io
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from langbot_plugin.api.definition.components.manifest import ComponentManifest
from langbot_plugin.api.entities.builtin.resource.tool import LLMTool
from langbot_plugin.api.entities.builtin.runner import RunnerResult
from langbot_plugin.entities.io.context import InstallationBinding

import components.tools.kb_tools as kb_tools
from components.tools.kb_tools import ListKnowledgeBaseFiles, ReadAroundPassage, SearchKnowledgeBase
from lucidrag.agent import output, scope
from lucidrag.agent.params import FORMATS, MAX_TOP_K
from lucidrag.ingestion.parsing import registry
from lucidrag.state.storage_keys import file_record_key, settings_key
from tests.conftest import FakePlugin, Harness
from tests.fakes import HostKnowledgeBase, HostQuery, QueryScopedActions
from tests.samples import _canvas

ROOT = Path(__file__).resolve().parent.parent
MANUALS, PRICES, OTHER = "kb-manuals", "kb-prices", "kb-other-engine"
OTHER_MARKER = "other-engine-marker"
PAGES = ["Installation. Mount the pump P-100 on a level base.",
         "Maintenance. Grease the pump bearings every 500 hours.",
         "Warranty. The pump warranty lasts 24 months from delivery.",
         "Disposal. Return the pump to the dealer at end of life."]


def as_runner_reports(answer: Any) -> dict[str, Any]:
    """A tool's answer as an SDK 0.7.18 runner reports it (`ctx.api.call_tool` puts every result
    into RunnerResult.tool_call_completed, whose payload takes a dict), within the size cap."""
    RunnerResult.tool_call_completed("run-1", "call-1", "lucidrag_search", result=answer)
    assert output.size(answer) <= output.MAX_ANSWER_CHARS
    return answer


def titled_pdf(title: str, pages: list[str]) -> bytes:
    buffer = io.BytesIO()
    canvas, (_, height) = _canvas(buffer)
    canvas.setTitle(title)
    for text in pages:
        canvas.setFont("Helvetica", 11)
        canvas.drawString(72, height - 72, text)
        canvas.showPage()
    canvas.save()
    return buffer.getvalue()


class ScopedPlugin(FakePlugin):
    """The plugin object, with the unscoped KB calls (every KB of the workspace) recorded: a tool
    must never use them (the engine's once-per-process look for deleted KBs lists them)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.unscoped: list[str] = []

    async def list_knowledge_bases(self) -> list[dict[str, Any]]:
        self.unscoped.append("list_knowledge_bases")
        await self._call("list_knowledge_bases")
        kbs = self.queries.knowledge_bases.values() if self.queries else []
        return [{"uuid": kb.uuid, "name": kb.name, "description": kb.description} for kb in kbs]

    async def retrieve_knowledge(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        self.unscoped.append("retrieve_knowledge")
        raise AssertionError("a tool used the unscoped retrieve_knowledge")


class World:
    """One LangBot workspace: LucidRAG's KBs `manuals` (a PDF and a text) and `prices` (a text),
    another engine's KB, and the pipeline queries the tests start."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.host: ScopedPlugin = harness.host  # type: ignore[assignment]
        self.files: dict[str, str] = {}
        self.unscoped_before: list[str] = []  # the unscoped calls the engine made while ingesting

    @property
    def queries(self) -> QueryScopedActions:
        assert self.host.queries is not None
        return self.host.queries

    async def build(self) -> World:
        for kb, name in ((MANUALS, "Manuals"), (PRICES, "Price lists")):
            await self.harness.create(kb)
            self.harness.knowledge_base_in_langbot(kb, name)
        self.files["manual"] = (await self.harness.ingest(MANUALS, "pump-manual.pdf", titled_pdf("Pump manual", PAGES))).document_id
        self.files["notes"] = (await self.harness.ingest(MANUALS, "notes.txt", b"Service notes\n\nThe pump P-100 hums when its bearings are dry.")).document_id
        self.files["march"] = (await self.harness.ingest(PRICES, "march.txt", b"March price list\n\nPump P-100 costs 1,200 euros in March.")).document_id
        self.queries.add_knowledge_base(HostKnowledgeBase(OTHER, "Other engine", other_engine_results=[{
            "id": "x", "content": [{"type": "text", "text": OTHER_MARKER}], "metadata": {"file_id": "f", "chunk_index": 0}}]))
        self.unscoped_before = list(self.host.unscoped)
        return self

    def query(self, *kbs: str) -> HostQuery:
        return self.queries.start_query(list(kbs))

    async def search(self, asked: HostQuery | None, harness: Harness | None = None, /,
                     **params: Any) -> dict[str, Any]:
        return await self._call(SearchKnowledgeBase(), asked, harness, params)

    async def list_files(self, asked: HostQuery | None, harness: Harness | None = None, /,
                         **params: Any) -> dict[str, Any]:
        return await self._call(ListKnowledgeBaseFiles(), asked, harness, params)

    async def read_around(self, asked: HostQuery | None, harness: Harness | None = None, /,
                          **params: Any) -> dict[str, Any]:
        return await self._call(ReadAroundPassage(), asked, harness, params)

    async def _call(self, tool: Any, query: HostQuery | None, harness: Harness | None, params: dict[str, Any]) -> dict[str, Any]:
        return as_runner_reports(await (harness or self.harness).call_tool(
            tool, params, query.query_id if query else -1, query.query_uuid if query else None))


def restarted(host: ScopedPlugin) -> Harness:
    """The plugin process restarted: nothing in memory, the same LangBot (storage, vectors, KBs)."""
    fresh = ScopedPlugin()
    fresh.collections, fresh.dims, fresh.storage = host.collections, host.dims, host.storage
    fresh.installation_storage, fresh.queries = host.installation_storage, host.queries
    harness = Harness(fresh)
    assert fresh.queries is not None
    for kb in fresh.queries.knowledge_bases.values():
        if kb.engine is not None:
            kb.engine = harness.component.retrieve
    return harness


def records_read(host: FakePlugin, kb_id: str) -> set[str]:
    return {key for key in host.reads if key.startswith(file_record_key(kb_id, ""))}


@pytest.fixture
async def world() -> World:
    return await World(Harness(ScopedPlugin())).build()


# ---------------------------------------------------------------- scope


async def test_a_search_reads_only_the_querys_knowledge_bases_through_the_scoped_retrieve(world: World):
    found = await world.search(world.query(PRICES), query="pump price")
    assert found["searched"] == ["Price lists"]
    assert found["passages"] and all(p["id"].startswith(PRICES + ":") for p in found["passages"])
    assert "1,200 euros" in found["passages"][0]["text"]
    assert [r["kb_id"] for r in world.queries.retrieved] == [PRICES]
    assert world.host.unscoped == world.unscoped_before


async def test_a_knowledge_base_outside_the_querys_set_is_refused_by_id_or_name_naming_only_the_allowed(world: World):
    query = world.query(PRICES)
    for wanted in (MANUALS, "Manuals", "manuals"):
        refused = await world.search(query, query="bearings", knowledge_base=wanted)
        assert refused == {"error": scope.NOT_AVAILABLE.format(names='"Price lists"')}
    assert world.queries.retrieved == []
    assert (await world.search(query, query="pump", knowledge_base="price lists"))["searched"] == ["Price lists"]


@pytest.mark.parametrize("fault", ["error", "timeout", "empty", "finished", "no query", "event run"])
async def test_without_a_clear_answer_from_the_host_nothing_is_searched(world: World, fault: str,
                                                                          monkeypatch: pytest.MonkeyPatch):
    query: HostQuery | None = world.query(MANUALS, PRICES)
    if fault == "error":
        world.host.fail("list_pipeline_knowledge_bases")
    elif fault == "timeout":
        monkeypatch.setattr(kb_tools, "LIST_TIMEOUT_S", 0.01)
        world.host.hang("list_pipeline_knowledge_bases")
    elif fault == "empty":
        query = world.query()
    elif fault == "finished":
        world.queries.finish_query(query)
    elif fault == "no query":
        query = None  # query_id -1, no uuid: LangBot's reference for an action outside any query
    elif fault == "event run":  # an agent run an event started: a synthetic query, never in the pool
        query = HostQuery(-1, str(uuid.uuid4()), "workspace-1", [MANUALS])
    for call in (world.search(query, query="pump"), world.list_files(query),
                 world.read_around(query, passage_id=f"{MANUALS}:{world.files['manual']}:0")):
        assert await call == {"error": scope.NO_KNOWLEDGE_BASE}
    if fault == "no query":
        assert world.host.calls["list_pipeline_knowledge_bases"] == 0, "nothing to ask LangBot about"
    assert world.queries.retrieved == [] and world.host.calls["retrieve_knowledge_base"] == 0
    assert world.host.unscoped == world.unscoped_before


async def test_another_engines_knowledge_base_in_the_set_is_never_searched_nor_listed(world: World):
    query = world.query(OTHER, MANUALS)
    found = await world.search(query, query="pump")
    assert found["searched"] == ["Manuals"] and OTHER_MARKER not in json.dumps(found)
    assert [r["kb_id"] for r in world.queries.retrieved] == [MANUALS]
    assert [kb["name"] for kb in (await world.list_files(query))["knowledge_bases"]] == ["Manuals"]
    assert await world.search(query, query="pump", knowledge_base="Other engine") == {
        "error": scope.NOT_AVAILABLE.format(names='"Manuals"')}
    assert await world.search(world.query(OTHER), query="pump") == {"error": scope.NO_KNOWLEDGE_BASE}


async def test_forged_passage_and_file_ids_of_another_pipelines_kb_read_nothing_of_it(world: World):
    first = (await world.search(world.query(MANUALS), query="bearings grease"))["passages"][0]
    harness = restarted(world.host)  # nothing of either KB in memory: every read shows
    host: ScopedPlugin = harness.host  # type: ignore[assignment]
    other_pipeline = world.queries.start_query([PRICES])
    refused = await world.read_around(other_pipeline, harness, passage_id=first["id"])
    assert refused == await world.read_around(other_pipeline, harness, passage_id=f"{PRICES}:{uuid.uuid4()}:0")
    assert refused == {"error": "No such passage in the knowledge bases you may use here. Pass an `id` exactly "
                                "as lucidrag_search returned it."}
    named = await world.search(other_pipeline, harness, query="bearings", file=world.files["manual"])
    assert named["error"].startswith('No file matching "') and "Manuals" not in named["error"]
    assert records_read(host, MANUALS) == set() and MANUALS not in host.engine.installation("dedicated").kbs
    misplaced = f"{PRICES}:{world.files['manual']}:0"  # an allowed KB, a file of another
    assert await world.read_around(other_pipeline, harness, passage_id=misplaced) == refused
    assert file_record_key(PRICES, world.files["manual"]) not in host.reads
    assert {r["kb_id"] for r in world.queries.retrieved} == {MANUALS}  # only the first pipeline's search


async def test_two_pipelines_each_read_only_their_own_knowledge_base(world: World):
    manuals_only, prices_only = world.query(MANUALS), world.query(PRICES)
    for query, own, foreign in ((manuals_only, "bearings", "1,200 euros"), (prices_only, "1,200 euros", "bearings")):
        for params in ({"query": "pump bearings price"}, {"query": "pump", "file": "march"},
                       {"query": "pump", "file": "Pump manual"}, {"query": "bearings", "top_k": 10}):
            answer = json.dumps(await world.search(query, **params), ensure_ascii=False)
            assert foreign not in answer
        listed = json.dumps(await world.list_files(query))
        assert ("March price list" in listed) == (query is prices_only)
        assert ("Pump manual" in listed) == (query is manuals_only)
        assert own in json.dumps(await world.search(query, query=own), ensure_ascii=False)


async def test_two_installations_in_one_runtime_see_only_their_own_knowledge_bases():
    """One plugin object and engine serve two installations (shared runtime); each installation's
    plugin storage is its own. Even a query whose set holds both KBs gets, in each installation,
    only that installation's."""
    host = ScopedPlugin()
    host.queries = QueryScopedActions()

    def binding() -> InstallationBinding:
        return InstallationBinding(instance_uuid="i", workspace_uuid="w", placement_generation=1,
                                   installation_uuid=str(uuid.uuid4()), runtime_revision=1, artifact_digest="a" * 64)

    first, second = Harness(host, binding=binding()), Harness(host, binding=binding())
    for harness, kb, text in ((first, "kb-first", b"First\n\nThe boiler B-7 runs at 80 degrees."),
                              (second, "kb-second", b"Second\n\nThe boiler B-7 is serviced in May.")):
        await harness.create(kb)
        await harness.ingest(kb, "boiler.txt", text)
        harness.knowledge_base_in_langbot(kb, kb)
    both = host.queries.start_query(["kb-first", "kb-second"], workspace="w")
    answers = {}
    for harness in (first, second):
        found = as_runner_reports(await harness.call_tool(SearchKnowledgeBase(), {"query": "boiler B-7"},
                                                   both.query_id, both.query_uuid))
        answers[harness] = found
        listed = as_runner_reports(await harness.call_tool(ListKnowledgeBaseFiles(), {}, both.query_id, both.query_uuid))
        assert [kb["name"] for kb in listed["knowledge_bases"]] == found["searched"]
    assert answers[first]["searched"] == ["kb-first"] and "80 degrees" in json.dumps(answers[first])
    assert answers[second]["searched"] == ["kb-second"] and "80 degrees" not in json.dumps(answers[second])
    foreign = answers[first]["passages"][0]["id"]
    refused = as_runner_reports(await second.call_tool(ReadAroundPassage(), {"passage_id": foreign},
                                                both.query_id, both.query_uuid))
    assert "error" in refused
    assert set(host.installation_storage) == {first.binding.installation_uuid, second.binding.installation_uuid}


async def test_the_query_uuid_is_what_the_host_resolves_and_the_legacy_id_alone_still_works(world: World):
    query = world.query(PRICES)
    assert (await world.search(query, query="pump"))["searched"] == ["Price lists"]
    assert world.host.calls["list_pipeline_knowledge_bases"] == 1
    found = await world.harness.call_tool(SearchKnowledgeBase(), {"query": "pump"}, query.query_id, None)  # no uuid
    assert as_runner_reports(found)["searched"] == ["Price lists"]
    manuals = world.query(MANUALS)  # given both, LangBot goes by the uuid
    found = await world.harness.call_tool(SearchKnowledgeBase(), {"query": "pump"}, query.query_id, manuals.query_uuid)
    assert as_runner_reports(found)["searched"] == ["Manuals"]
    elsewhere = world.queries.start_query([PRICES], workspace="another-workspace")
    assert await world.search(elsewhere, query="pump") == {"error": scope.NO_KNOWLEDGE_BASE}


async def test_whether_a_knowledge_base_is_ours_is_asked_of_storage_once(world: World):
    harness = restarted(world.host)
    host = harness.host
    query = world.queries.start_query([MANUALS, OTHER])
    for _ in range(3):
        await world.list_files(query, harness)
    assert host.reads[settings_key(MANUALS)] == 1 and host.reads[settings_key(OTHER)] == 1
    fresh = restarted(world.host)
    fresh.host.fail("get_plugin_storage", when=lambda key, **_: key == settings_key(PRICES))
    assert await world.search(world.queries.start_query([PRICES]), fresh, query="pump") == {
        "error": scope.NO_KNOWLEDGE_BASE}, "storage failing: not known to be ours, refused"


async def test_a_tool_search_costs_a_retrieve_plus_two_host_actions(world: World):
    """A tool search is the KB's own retrieve plus the scope listing and the retrieve action: no
    storage listing, no record read beyond what the retrieve reads."""
    world.queries.knowledge_bases[MANUALS].retrieval_settings["query_log"] = "off"  # its writes are timed
    query = world.query(MANUALS)
    await world.search(query, query="warranty months")  # the ownership answer is cached from here on
    before = world.host.calls.copy()
    await world.harness.retrieve(MANUALS, "warranty months", settings={"query_log": "off"})
    plain = world.host.calls - before
    before = world.host.calls.copy()
    await world.search(query, query="warranty months")
    tool = world.host.calls - before
    assert tool - plain == {"list_pipeline_knowledge_bases": 1, "retrieve_knowledge_base": 1}
    assert plain - tool == {}


async def test_a_knowledge_base_that_fails_to_answer_leaves_the_others_and_says_so(world: World):
    world.host.fail("retrieve_knowledge_base", when=lambda kb_id, **_: kb_id == MANUALS)
    found = await world.search(world.query(MANUALS, PRICES), query="pump")
    assert found["searched"] == ["Manuals", "Price lists"]
    assert {p["id"].split(":")[0] for p in found["passages"]} == {PRICES}
    assert found["note"] == "Manuals could not be searched now; try again later."


async def test_an_unexpected_failure_is_an_answer_the_model_reads_not_an_exception(world: World,
                                                                                    monkeypatch: pytest.MonkeyPatch):
    async def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a defect")

    monkeypatch.setattr(world.host.engine, "read_kb", broken)
    assert await world.list_files(world.query(MANUALS)) == {"error": kb_tools.FAILED}


# ---------------------------------------------------------------- filters


async def test_the_filter_is_built_from_file_format_and_pages_never_taken_from_the_model(world: World):
    query = world.query(MANUALS, PRICES)
    manual = world.files["manual"]
    await world.search(query, query="pump", file="pump manual", format="pdf", page_from=3, page_to=2,
                       filters={"$or": [{"file_id": {"$ne": ""}}]}, where={"kb": "x"}, top_k=99)
    (sent,) = world.queries.retrieved
    assert sent == {"kb_id": MANUALS, "query": "pump", "top_k": MAX_TOP_K, "filters": {"$and": [
        {"file_id": manual}, {"format": "pdf"}, {"page": {"$gte": 2}}, {"page": {"$lte": 3}}]}}
    world.queries.retrieved.clear()
    found = await world.search(query, query="pump", file=world.files["march"])  # a file id
    assert world.queries.retrieved == [{"kb_id": PRICES, "query": "pump", "top_k": 5,
                                        "filters": {"file_id": world.files["march"]}}]
    assert found["filter"] == {"files": ["March price list"]}
    world.queries.retrieved.clear()
    await world.search(query, query="pump", format="text")
    assert [(r["kb_id"], r["filters"]) for r in world.queries.retrieved] == [
        (MANUALS, {"format": "text"}), (PRICES, {"format": "text"})]


async def test_a_file_named_by_part_of_its_title_and_a_page_range_return_that_files_pages_only(world: World):
    found = await world.search(world.query(MANUALS), query="pump", file="manual", page_from=2, page_to=3)
    pages = {int(re.search(r"p\. (\d+)", p["source"]).group(1)) for p in found["passages"]}
    assert found["passages"] and pages <= {2, 3}
    assert all(p["id"].split(":")[1] == world.files["manual"] for p in found["passages"])
    assert found["filter"] == {"files": ["Pump manual"], "pages": "2-3"}


async def test_a_file_no_allowed_knowledge_base_holds_is_refused_before_any_search(world: World):
    refused = await world.search(world.query(MANUALS, PRICES), query="pump", file="budget 2031")
    assert refused == {"error": 'No file matching "budget 2031" in "Manuals", "Price lists". Call '
                                "lucidrag_list_files to see the files, then pass a `file_id` or a title from it."}
    assert world.queries.retrieved == []


async def test_bad_values_are_clamped_or_explained(world: World):
    query = world.query(PRICES)
    assert await world.search(query, query="  ") == {"error": "Give `query`: the words or question to search for."}
    assert (await world.search(query, query="pump", format="exe"))["error"].startswith("`format` must be one of: pdf")
    await world.search(query, query="pump", top_k=0, page_from=-4)
    assert world.queries.retrieved[-1]["top_k"] == 1 and world.queries.retrieved[-1]["filters"] == {"page": {"$gte": 1}}
    assert await world.read_around(query, passage_id="") == {
        "error": "Give `passage_id`: the `id` of a passage that lucidrag_search returned."}


async def test_what_the_automatic_search_missed_a_narrowed_search_finds():
    """Twelve monthly price lists alike: LangBot's automatic retrieval (the top 3 for the user's
    words) brings three; for any other month the model narrows the search to that month's file."""
    harness = Harness(ScopedPlugin())
    await harness.create(PRICES)
    months = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
              "October", "November", "December"]
    for n, month in enumerate(months):
        await harness.ingest(PRICES, f"{month.lower()}.txt",
                             f"{month} price list\n\nThe pump P-100 costs {1000 + 10 * n} euros.".encode())
    harness.knowledge_base_in_langbot(PRICES, "Price lists")
    automatic = " ".join(await harness.texts(PRICES, "how much does the pump cost", settings={"top_k": 3}))
    missed = [(month, f"{1000 + 10 * n} euros") for n, month in enumerate(months) if month not in automatic]
    assert len(missed) == 9
    query = harness.host.queries.start_query([PRICES])  # type: ignore[union-attr]
    for month, price in missed:
        found = as_runner_reports(await harness.call_tool(SearchKnowledgeBase(), {
            "query": "how much does the pump cost", "file": f"{month} price list", "top_k": 3},
            query.query_id, query.query_uuid))
        assert [p["source"] for p in found["passages"]] == [f"{month} price list"]
        assert price in found["passages"][0]["text"]


# ---------------------------------------------------------------- output


async def test_every_passage_carries_its_id_source_line_score_and_text(world: World):
    found = await world.search(world.query(MANUALS), query="grease bearings hours", top_k=2)
    first = found["passages"][0]
    assert set(first) == {"id", "source", "score", "text"}
    kb, file_id, index = first["id"].split(":")
    assert (kb, file_id) == (MANUALS, world.files["manual"]) and index.isdigit()
    assert first["source"] == "Pump manual · p. 2" and "Grease the pump bearings" in first["text"]
    assert not first["text"].startswith("Source:"), "the source line is said once, in `source`"
    assert 0 < first["score"] <= 1


async def test_a_source_line_is_made_when_the_knowledge_base_gives_none(world: World):
    world.queries.knowledge_bases[PRICES].retrieval_settings["source_line"] = False
    (first,) = (await world.search(world.query(PRICES), query="price March", top_k=1))["passages"]
    assert first["source"] == "March price list" and first["text"].startswith("Pump P-100 costs")


async def test_no_match_says_so_and_a_page_range_says_what_it_leaves_out(world: World):
    found = await world.search(world.query(PRICES), query="pump", page_from=2)
    assert found["passages"] == []
    assert found["note"] == ("No passage matched. Try other words, or fewer filters. A page range leaves out "
                             "files without page numbers (only PDFs and similar have them).")


def test_the_answer_is_capped_and_says_what_it_left_out():
    rows = [output.Passage(f"kb:f:{n}", "f", "Doc", "word " * 2000, 0.5).row() for n in range(10)]
    assert all(len(r["text"]) == output.MAX_PASSAGE_CHARS and r["text"].endswith(" …") for r in rows)
    parsed = output.answer({"searched": ["A"]}, rows, "passages")
    assert output.size(parsed) <= output.MAX_ANSWER_CHARS and 0 < len(parsed["passages"]) < 10
    assert parsed["note"] == f"{10 - len(parsed['passages'])} more left out to keep this answer short; narrow the request."


async def test_the_file_list_gives_title_format_pages_chunks_and_status(world: World):
    listed = await world.list_files(world.query(MANUALS, PRICES))
    assert listed["knowledge_bases"] == [{"name": "Manuals", "files": 2}, {"name": "Price lists", "files": 1}]
    rows = {r["title"]: r for r in listed["files"]}
    assert rows["Pump manual"] | {"chunks": 0} == {"file_id": world.files["manual"], "title": "Pump manual",
                                                   "format": "pdf", "pages": 4, "chunks": 0, "status": "ready",
                                                   "knowledge_base": "Manuals"}
    assert "pages" not in rows["March price list"] and rows["March price list"]["format"] == "text"
    narrowed = await world.list_files(world.query(MANUALS), name_contains="SERVICE", limit=99)
    assert [r["title"] for r in narrowed["files"]] == ["Service notes"] and "knowledge_base" not in narrowed["files"][0]
    capped = await world.list_files(world.query(MANUALS), limit=1)
    assert len(capped["files"]) == 1 and capped["note"].startswith("1 more files match")


async def test_reading_around_a_passage_gives_its_neighbours_in_order(world: World):
    query = world.query(MANUALS)
    hit = (await world.search(query, query="warranty 24 months", file="Pump manual", top_k=1))["passages"][0]
    kb, file_id, index = hit["id"].split(":")
    around = await world.read_around(query, passage_id=hit["id"], before=1, after=9)
    indexes = [int(p["id"].split(":")[2]) for p in around["passages"]]
    assert indexes == list(range(max(0, int(index) - 1), int(index) + 4))[: len(indexes)] and int(index) in indexes
    assert around["file"] == "Pump manual" and around["knowledge_base"] == "Manuals"
    assert [p["source"] for p in around["passages"]] == [f"Pump manual · p. {n + 1}" for n in indexes]
    assert "score" not in around["passages"][0]


# ---------------------------------------------------------------- the components LangBot loads


def tool_manifests() -> list[dict[str, Any]]:
    return [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted((ROOT / "components/tools").glob("*.yaml"))]


def test_the_tools_are_what_langbot_builds_llm_functions_from():
    manifests = tool_manifests()
    assert sorted(m["metadata"]["name"] for m in manifests) == ["lucidrag_list_files", "lucidrag_read_around",
                                                                 "lucidrag_search"]
    for manifest in manifests:
        parsed = ComponentManifest(owner="test", manifest=manifest, rel_path="components/tools/x.yaml")
        assert parsed.kind == "Tool" and re.fullmatch(r"[A-Za-z0-9_-]{1,64}", parsed.metadata.name)
        assert {"en_US", "zh_Hans", "zh_Hant", "ja_JP"} <= set(manifest["metadata"]["label"])
        assert {"en_US", "zh_Hans", "zh_Hant", "ja_JP"} <= set(manifest["metadata"]["description"])
        spec = manifest["spec"]
        # as pkg/provider/tools/loaders/plugin.py builds it
        tool = LLMTool(name=parsed.metadata.name, human_desc=parsed.metadata.description.en_US,
                       description=spec["llm_prompt"], parameters=spec["parameters"], func=lambda p: {})
        schema = tool.parameters
        assert schema["type"] == "object" and set(schema["required"]) <= set(schema["properties"])
        for name, prop in schema["properties"].items():
            assert prop["type"] in ("string", "integer") and len(prop["description"]) > 20, name
        cls = getattr(kb_tools, manifest["execution"]["python"]["attr"])
        assert manifest["execution"]["python"]["path"] == "kb_tools.py" and hasattr(cls(), "call")


def test_the_format_choices_are_the_parser_families():
    (search,) = [m for m in tool_manifests() if m["metadata"]["name"] == "lucidrag_search"]
    assert tuple(search["spec"]["parameters"]["properties"]["format"]["enum"]) == FORMATS
    assert set(FORMATS) == set(registry._parsers())


def test_the_manifest_loads_the_tools_beside_the_engine_and_the_page():
    manifest = yaml.safe_load((ROOT / "manifest.yaml").read_text(encoding="utf-8"))
    assert manifest["spec"]["components"]["Tool"] == {"fromDirs": [{"path": "components/tools/"}]}
