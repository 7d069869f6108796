"""scripts/offline_llm.py's scripted tool calls, which the real-host E2E of the agent tools uses:
a `CALL <tool> <json>` line makes an OpenAI tool call once, then the tool's answer is repeated."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "offline_llm.py"
spec = importlib.util.spec_from_file_location("offline_llm", SCRIPT)
offline_llm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(offline_llm)  # type: ignore[union-attr]

TOOLS = [{"type": "function", "function": {"name": "lucidrag_search", "parameters": {}}}]
ASK = {"role": "user", "content": 'Look it up.\nCALL lucidrag_search {"query": "pump", "page_from": 2}'}


def test_a_call_line_becomes_a_tool_call_only_when_tools_are_offered():
    call = offline_llm.scripted_tool_call([ASK], TOOLS)
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"] == {"name": "lucidrag_search", "arguments": '{"query": "pump", "page_from": 2}'}
    assert offline_llm.scripted_tool_call([ASK], []) is None
    assert offline_llm.scripted_tool_call([{"role": "user", "content": "no call here"}], TOOLS) is None


def test_after_the_tools_answered_their_results_are_the_answer():
    answered = [ASK, {"role": "assistant", "content": None, "tool_calls": []},
                {"role": "tool", "content": '{"passages": [1]}', "tool_call_id": "c1"}]
    assert offline_llm.scripted_tool_call(answered, TOOLS) is None
    assert offline_llm.tool_results(answered) == 'Tool results:\n{"passages": [1]}'
    assert offline_llm.tool_results([ASK]) is None
    again = answered + [ASK]  # a new user turn asks again
    assert offline_llm.scripted_tool_call(again, TOOLS) is not None
