"""The pipeline journey on the real host: a KB bound to a pipeline feeds the bot.

Called from drive.py (two hooks around its delete-a-file step). LangBot 4.11.2 answers only through
an agent-runner plugin; offline there is none, so this attaches tests/e2e/fixture_runner/ (a
minimal runner: retrieve from the pipeline's KBs through the host, then one LLM call) with a second
`lbp run`, registers an LLM model pointing at scripts/offline_llm.py (which records every request),
creates a pipeline through the HTTP API with the KB bound, and sends questions through the
pipeline's debug chat (`POST /api/v1/pipelines/<uuid>/run`: one turn through the scheduler and the
websocket adapter the web UI's debug chat uses). The fixture runner prints each result as
LocalAgent does, `[n] text`, so whatever the model learns of a passage's source is in its content.
Checks, one `[PASS] pipeline.<what>` line each: the LLM request holds the right passage led by its
source line (document name, heading path, page, labelled in the passage's language), in English
and in Chinese; after the file is deleted its text never reaches the LLM.

The agent-tools stage (`agent_tools`, after KB B exists): the fixture runner's `kb_tools` (no
automatic retrieval: every passage the model sees came from a tool) and a model registered with the
`func_call` ability at the same offline server, which answers a `CALL <tool> <json>` line of the
user's message with an OpenAI `tool_calls` and then repeats the tool's result. Pipeline A is bound
to KB A, pipeline B to KB B, a third to none. Checks: LucidRAG's three tools are offered to the
model; a search narrowed to a file (by title) and a page returns that file's passage with its
source line, and the answer reaches the model and the reply; reading around it and listing the
files work; pipeline B cannot read KB A by its id, by a search or by A's passage id, and nothing of
KB A reaches any of its LLM requests; the pipeline without a LucidRAG KB is refused.

Scenario key "pipeline" (tests/e2e/e2e_samples.py):
  {"questions": [{"label", "query", "expect_text", "expect_citation": [substrings of the source line],
                  "expect_heading_once"}],
   "deleted": {"query", "expect_text"}}
Scenario key "agent_tools":
  {"search": {"query", "file_title", "file", "page", "expect_text", "expect_source"},
   "kb_b_text": a text only KB B holds}
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE_DIR = os.path.join(HERE, "fixture_runner")
RUNNER_ID = "plugin:lucidrag/kb-preview-runner/kb_preview"
TOOLS_RUNNER_ID = "plugin:lucidrag/kb-preview-runner/kb_tools"
MODEL_NAME = "retrieval-preview"
TOOLS_MODEL_NAME = "scripted-tool-caller"  # the same offline server, registered with func_call
LUCIDRAG_TOOLS = ("lucidrag_search", "lucidrag_list_files", "lucidrag_read_around")
PASSAGE = re.compile(r"^\[(\d+)\] ", re.M)
# LucidRAG's source line, in the passage's language (lucidrag/retrieval/sources.py)
SOURCE_LABELS = ("Source: ", "来源：", "來源：", "出典：")


@dataclass
class Passage:
    source: str
    text: str


@dataclass
class Stage:
    api: Any                      # drive.Api, logged in
    report: Any                   # drive.Report
    llm: Any                      # drive.Api on the offline LLM server
    proc: Any                     # a drive.PluginProc for the fixture runner
    kb_uuid: str = ""
    pipeline_uuid: str = ""
    model_uuid: str = ""
    ok: bool = False
    seconds: float = 0.0          # time spent in this stage (setup + questions), printed at teardown
    llm_base: str = ""            # the offline LLM's OpenAI base URL
    extra_pipelines: list = field(default_factory=list)  # the agent-tools stage's pipelines

    def check(self, what: str, ok: bool, detail: str = "") -> bool:
        return self.report.check(f"pipeline.{what}", ok, detail)


def _ok(status: int, body) -> bool:
    return status == 200 and isinstance(body, dict) and body.get("code") == 0


def _short(obj, n: int = 300) -> str:
    s = obj if isinstance(obj, str) else repr(obj)
    return s if len(s) <= n else s[:n] + "..."


def system_prompt(request: dict) -> str:
    msgs = request.get("messages") or []
    return "\n".join(m.get("content") if isinstance(m.get("content"), str) else str(m.get("content"))
                     for m in msgs if isinstance(m, dict) and m.get("role") == "system")


def passages(prompt: str) -> list[Passage]:
    """The fixture runner writes `[i] ` then the result's content, whose first line is its source
    line (empty `source` if it has none)."""
    marks = list(PASSAGE.finditer(prompt))
    out = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(prompt)
        first, _, rest = prompt[m.end():end].strip().partition("\n")
        labelled = first.startswith(SOURCE_LABELS)
        out.append(Passage(first if labelled else "", rest.strip() if labelled else f"{first}\n{rest}".strip()))
    return out


def setup(stage: Stage, *, lbp: str, workdir: str, debug_url: str, debug_key: str, llm_base: str,
          kb_uuid: str, log_path: str, pid_file: str | None = None) -> bool:
    """Attach the fixture runner, register the LLM, create the pipeline bound to the KB."""
    t_start = time.time()
    try:
        return _setup(stage, lbp=lbp, workdir=workdir, debug_url=debug_url, debug_key=debug_key, llm_base=llm_base,
                      kb_uuid=kb_uuid, log_path=log_path, pid_file=pid_file)
    finally:
        stage.seconds += time.time() - t_start


def _setup(stage: Stage, *, lbp: str, workdir: str, debug_url: str, debug_key: str, llm_base: str,
           kb_uuid: str, log_path: str, pid_file: str | None) -> bool:
    api = stage.api
    copy = os.path.join(workdir, "fixture_runner")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(FIXTURE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    stage.proc.start(lbp, copy, debug_url, debug_key, log_path, pid_file)
    listed, t0 = False, time.time()
    while time.time() - t0 < 90 and stage.proc.alive():
        s, b = api.call("GET", "/api/v1/pipelines/_/metadata")
        if _ok(s, b) and RUNNER_ID in repr(b.get("data")):
            listed = True
            break
        time.sleep(1)
    if not stage.check("fixture runner listed as a pipeline runner", listed,
                       f"{RUNNER_ID} after {time.time() - t0:.1f}s" if listed else
                       ("its lbp run exited, see " + log_path if not stage.proc.alive() else "not listed after 90s")):
        return False

    s, b = api.call("POST", "/api/v1/provider/models/llm",
                    {"name": MODEL_NAME, "provider": {"requester": "openai-chat-completions", "base_url": llm_base,
                                                      "api_keys": ["sk-offline"]},
                     "abilities": [], "extra_args": {}})
    if not stage.check("register the LLM model (offline retrieval-preview server)", _ok(s, b), _short(b)):
        return False
    stage.model_uuid = b["data"]["uuid"]
    stage.llm_base = llm_base

    # as in the web UI: create the pipeline, then pick the runner, its model and the KB, save
    s, b = api.call("POST", "/api/v1/pipelines", {"name": "lucidrag-e2e-pipeline",
                                                  "description": "LucidRAG E2E: KB bound to a pipeline"})
    if not stage.check("create a pipeline (POST /api/v1/pipelines)", _ok(s, b), _short(b)):
        return False
    stage.pipeline_uuid = b["data"]["uuid"]
    s, b = api.call("GET", f"/api/v1/pipelines/{stage.pipeline_uuid}")
    pipe = (b.get("data") or {}).get("pipeline") or {} if _ok(s, b) else {}
    config = pipe.get("config") or {}
    ai = config.setdefault("ai", {})
    ai["runner"] = {**(ai.get("runner") or {}), "id": RUNNER_ID}
    ai["runner_config"] = {RUNNER_ID: {"model": stage.model_uuid, "knowledge-bases": [kb_uuid], "top-k": 4}}
    s, b = api.call("PUT", f"/api/v1/pipelines/{stage.pipeline_uuid}",
                    {"name": pipe.get("name", "lucidrag-e2e-pipeline"), "description": pipe.get("description", ""),
                     "config": config})
    s2, b2 = api.call("GET", f"/api/v1/pipelines/{stage.pipeline_uuid}")
    stored = ((((b2.get("data") or {}).get("pipeline") or {}).get("config") or {}).get("ai") or {}) if _ok(s2, b2) else {}
    bound = (stored.get("runner") or {}).get("id") == RUNNER_ID and \
        kb_uuid in ((stored.get("runner_config") or {}).get(RUNNER_ID) or {}).get("knowledge-bases", [])
    if not stage.check("bind the KB and the model to the pipeline's runner (PUT, then GET shows them)",
                       _ok(s, b) and bound, "" if bound else f"PUT HTTP {s} {_short(b)}; stored ai={_short(stored)}"):
        return False
    stage.kb_uuid = kb_uuid
    stage.ok = True
    return True


def ask(stage: Stage, query: str) -> tuple[dict | None, list[dict], str]:
    """One debug-chat turn; returns (run data, the LLM requests it caused, error)."""
    stage.llm.call("POST", "/requests/reset", {})
    s, b = stage.api.call("POST", f"/api/v1/pipelines/{stage.pipeline_uuid}/run", {"message": query}, timeout=90)
    if not _ok(s, b):
        return None, [], f"HTTP {s} {_short(b)}"
    data = b.get("data") or {}
    s, r = stage.llm.call("GET", "/requests")
    reqs = (r or {}).get("requests") or [] if s == 200 and isinstance(r, dict) else []
    err = "" if data.get("status") == "completed" else f"run status {data.get('status')}: {_short(data)}"
    return data, reqs, err


def check_question(stage: Stage, q: dict, label: str) -> None:
    data, reqs, err = ask(stage, q["query"])
    if not stage.check(f"{label}: the debug chat answers (one LLM request)", not err and len(reqs) == 1,
                       err or f"{len(reqs)} LLM requests"):
        return
    prompt = system_prompt(reqs[0])
    found = passages(prompt)
    needle = q["expect_text"].lower()
    with_text = [p for p in found if needle in p.text.lower()]
    cites = q.get("expect_citation") or []
    right = [p for p in with_text if p.source and all(c in p.source for c in cites)]
    heading = q.get("expect_heading_once")
    if heading:  # the heading path is said once per passage: in the source line, not again as a line
        right = [p for p in right if heading in p.source and p.text.split("\n", 1)[0] != heading]
    detail = (f"source '{right[0].source}', {len(found)} passages" if right else
              f"{len(with_text)} of {len(found)} passages hold '{q['expect_text']}'; sources: "
              + _short([p.source for p in found], 400))
    stage.check(f"{label}: the LLM request holds the passage with '{q['expect_text']}' led by its source line "
                f"with {' · '.join(cites)!r}", bool(right), detail)
    reply = (data or {}).get("reply") or ""
    stage.check(f"{label}: the bot's reply is the model's answer", q["expect_text"].lower() in reply.lower(),
                _short(reply.replace("\n", " "), 160))


def before_delete(stage: Stage, sc: dict) -> None:
    t_start = time.time()
    try:
        _before_delete(stage, sc)
    finally:
        stage.seconds += time.time() - t_start


def _before_delete(stage: Stage, sc: dict) -> None:
    if not stage.ok:
        return
    for q in sc.get("questions", []):
        check_question(stage, q, q["label"])
    d = sc.get("deleted")
    if d:
        data, reqs, err = ask(stage, d["query"])
        seen = any(d["expect_text"].lower() in p.text.lower() for r in reqs for p in passages(system_prompt(r)))
        stage.check(f"before the delete: '{d['expect_text']}' reaches the LLM", not err and seen,
                    err or f"{len(reqs)} LLM requests")


def after_delete(stage: Stage, sc: dict, deleted_name: str) -> None:
    d = sc.get("deleted")
    if not stage.ok or not d:
        return
    t_start = time.time()
    data, reqs, err = ask(stage, d["query"])
    stage.seconds += time.time() - t_start
    blob = repr(reqs).lower()
    leaked = d["expect_text"].lower() in blob
    stage.check(f"after deleting {deleted_name}, its text ('{d['expect_text']}') never reaches the LLM",
                not err and len(reqs) == 1 and not leaked,
                err or (f"{len(reqs)} LLM requests" if len(reqs) != 1 else
                        ("LEAKED: " + _short(system_prompt(reqs[0]), 300)) if leaked else
                        f"{len(passages(system_prompt(reqs[0])))} other passages sent"))


def _pipeline(stage: Stage, name: str, runner: str, runner_config: dict) -> str:
    """A pipeline with `runner` and its config, as the web UI saves it; its uuid ("" on failure)."""
    s, b = stage.api.call("POST", "/api/v1/pipelines", {"name": name, "description": "LucidRAG E2E agent tools"})
    if not _ok(s, b):
        stage.check(f"create pipeline {name}", False, _short(b))
        return ""
    uuid_ = b["data"]["uuid"]
    stage.extra_pipelines.append(uuid_)
    s, b = stage.api.call("GET", f"/api/v1/pipelines/{uuid_}")
    pipe = (b.get("data") or {}).get("pipeline") or {} if _ok(s, b) else {}
    config = pipe.get("config") or {}
    ai = config.setdefault("ai", {})
    ai["runner"] = {**(ai.get("runner") or {}), "id": runner}
    ai["runner_config"] = {runner: runner_config}
    s, b = stage.api.call("PUT", f"/api/v1/pipelines/{uuid_}", {"name": name, "description": pipe.get("description", ""),
                                                              "config": config})
    return uuid_ if stage.check(f"create pipeline {name} with the tools runner", _ok(s, b), _short(b)) else ""


def tool_turn(stage: Stage, pipeline_uuid: str, tool: str, arguments: dict) -> tuple[list[dict], str, str]:
    """One debug-chat turn whose message asks the scripted model to call `tool`: (the LLM requests
    it caused, the tool's result as the model got it, the reply)."""
    stage.llm.call("POST", "/requests/reset", {})
    message = f"CALL {tool} {json.dumps(arguments, ensure_ascii=False)}"
    s, b = stage.api.call("POST", f"/api/v1/pipelines/{pipeline_uuid}/run", {"message": message}, timeout=120)
    data = (b.get("data") or {}) if _ok(s, b) else {}
    s, r = stage.llm.call("GET", "/requests")
    reqs = (r or {}).get("requests") or [] if s == 200 and isinstance(r, dict) else []
    results = [m.get("content") for req in reqs for m in req.get("messages") or []
               if isinstance(m, dict) and m.get("role") == "tool"]
    return reqs, str(results[-1]) if results else "", str(data.get("reply") or "")


def _json(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def agent_tools(stage: Stage, sc: dict, kb_a: Any, kb_b: Any) -> None:
    """The agent-tools stage (see the module's docstring); `kb_a` / `kb_b` are drive.KB."""
    if not stage.ok or not sc:
        return
    t_start = time.time()
    try:
        _agent_tools(stage, sc, kb_a, kb_b)
    finally:
        stage.seconds += time.time() - t_start


def _agent_tools(stage: Stage, sc: dict, kb_a: Any, kb_b: Any) -> None:
    api = stage.api
    s, b = api.call("POST", "/api/v1/provider/models/llm",
                    {"name": TOOLS_MODEL_NAME, "provider": {"requester": "openai-chat-completions",
                                                            "base_url": stage.llm_base, "api_keys": ["sk-offline"]},
                     "abilities": ["func_call"], "extra_args": {}})
    if not stage.check("register a model with function calling (scripted tool caller)", _ok(s, b), _short(b)):
        return
    model = b["data"]["uuid"]
    p_a = _pipeline(stage, "lucidrag-e2e-tools-A", TOOLS_RUNNER_ID, {"model": model, "knowledge-bases": [kb_a.uuid]})
    p_b = _pipeline(stage, "lucidrag-e2e-tools-B", TOOLS_RUNNER_ID, {"model": model, "knowledge-bases": [kb_b.uuid]})
    p_none = _pipeline(stage, "lucidrag-e2e-tools-none", TOOLS_RUNNER_ID, {"model": model, "knowledge-bases": []})
    if not (p_a and p_b and p_none):
        return
    q = sc["search"]
    file_id = ((kb_a.files.get(q["file"]) or {}).get("rec") or {}).get("uuid", "")

    # pipeline A: search one file and page, read around the hit, list the files
    reqs, result, reply = tool_turn(stage, p_a, "lucidrag_search", {"query": q["query"], "file": q["file_title"],
                                                                     "page_from": q["page"], "page_to": q["page"]})
    offered = [t.get("function", {}).get("name") for t in (reqs[0].get("tools") or [])] if reqs else []
    stage.check("tools: LucidRAG's three tools are offered to the model", set(LUCIDRAG_TOOLS) <= set(offered),
                f"offered {offered}")
    found = _json(result)
    hits = found.get("passages") or []
    right = [p for p in hits if q["expect_text"] in p.get("text", "") and q["expect_source"] in p.get("source", "")]
    stage.check(f"tools: lucidrag_search narrowed to '{q['file_title']}' p. {q['page']} returns '{q['expect_text']}' "
                f"with its source line, as the tool message of the model's second request",
                len(reqs) == 2 and bool(right), f"{len(reqs)} LLM requests; result {_short(result, 400)}")
    stage.check("tools: every passage is from that file", bool(hits) and bool(file_id)
                and all(p.get("id", "").split(":")[1:2] == [file_id] for p in hits),
                _short([p.get("id") for p in hits]))
    stage.check("tools: the tool's answer reaches the bot's reply", q["expect_text"] in reply, _short(reply, 200))
    passage_id = right[0]["id"] if right else ""
    reqs, result, _ = tool_turn(stage, p_a, "lucidrag_read_around", {"passage_id": passage_id, "before": 1, "after": 1})
    around = _json(result).get("passages") or []
    stage.check("tools: lucidrag_read_around returns the passage with its neighbours",
                passage_id in [p.get("id") for p in around], _short(result, 300))
    reqs, result, _ = tool_turn(stage, p_a, "lucidrag_list_files", {})
    listed = _json(result)
    stage.check("tools: lucidrag_list_files lists KB A's files, and only KB A",
                [k.get("name") for k in listed.get("knowledge_bases") or []] == [f"lucidrag-e2e-{kb_a.label}"]
                and any(q["file_title"] in f.get("title", "") for f in listed.get("files") or []), _short(result, 300))

    # pipeline B: KB A is out of reach, by its id, by a search, by a passage id of it
    seen: list[dict] = []
    for arguments, tool in (({"query": q["query"], "knowledge_base": kb_a.uuid}, "lucidrag_search"),
                            ({"query": q["query"]}, "lucidrag_search"),
                            ({"query": q["query"], "file": q["file_title"]}, "lucidrag_search"),
                            ({"passage_id": passage_id or f"{kb_a.uuid}:{file_id}:0"}, "lucidrag_read_around"),
                            ({}, "lucidrag_list_files")):
        reqs, result, _ = tool_turn(stage, p_b, tool, arguments)
        seen.extend(reqs)
        answer = _json(result)
        refused = "error" in answer
        own = answer.get("searched") == [f"lucidrag-e2e-{kb_b.label}"] or \
            [k.get("name") for k in answer.get("knowledge_bases") or []] == [f"lucidrag-e2e-{kb_b.label}"]
        expect_refusal = "knowledge_base" in arguments or "passage_id" in arguments or "file" in arguments
        stage.check(f"tools: pipeline B, {tool} {_short(json.dumps(arguments), 80)}: "
                    + ("refused" if expect_refusal else "only KB B"),
                    refused if expect_refusal else own, _short(result, 300))
    stage.check("tools: nothing of KB A reaches pipeline B's model", bool(seen) and q["expect_text"] not in repr(seen)
                and kb_a.uuid not in repr([m for r in seen for m in r.get("messages") or [] if m.get("role") == "tool"]),
                f"{len(seen)} LLM requests")
    reqs, result, _ = tool_turn(stage, p_b, "lucidrag_search", {"query": sc["kb_b_text"]})
    stage.check("tools: pipeline B finds its own KB's text", sc["kb_b_text"] in result, _short(result, 300))
    reqs, result, _ = tool_turn(stage, p_none, "lucidrag_search", {"query": q["query"]})
    stage.check("tools: a pipeline without a LucidRAG KB is refused",
                "No LucidRAG knowledge base is available" in result, _short(result, 300))
    s, b = api.call("GET", f"/api/v1/monitoring/tool-calls?pipelineId={p_a}")
    stage.report.info(f"LangBot's tool-call records for pipeline A: "
                      f"{_short((b.get('data') or {}).get('tool_calls') if _ok(s, b) else b, 300)}")


def teardown(stage: Stage) -> None:
    print(f"       pipeline stage took {stage.seconds:.1f}s", flush=True)
    for uuid_ in ([stage.pipeline_uuid] if stage.pipeline_uuid else []) + stage.extra_pipelines:
        s, b = stage.api.call("DELETE", f"/api/v1/pipelines/{uuid_}")
        stage.check("delete the pipeline", _ok(s, b), "" if _ok(s, b) else _short(b))
    stage.proc.stop()


def new_stage(api, report, llm_api, proc_factory: Callable[[], Any]) -> Stage:
    return Stage(api=api, report=report, llm=llm_api, proc=proc_factory())
