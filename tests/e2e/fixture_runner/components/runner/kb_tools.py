"""A minimal agent runner that leaves retrieval to the model's tools: what LocalAgent does with
tools, minus its automatic retrieval, so every passage the model sees came from a tool call.

For each message: up to MAX_ROUNDS of `invoke_llm` with the run's tools (ctx.resources.tools,
their schemas prefilled by the host); each tool call the model makes goes through the host
(`call_tool`, the run's own authority) and its result back to the model as a `tool` message.
The last answer is the reply.
"""

from __future__ import annotations

import json
import logging
from typing import Any, AsyncGenerator

from langbot_plugin.api.definition.components.runner.runner import Runner
from langbot_plugin.api.entities.builtin.provider.message import Message
from langbot_plugin.api.entities.builtin.resource.tool import LLMTool
from langbot_plugin.api.entities.builtin.runner import RunnerContext, RunnerResult

logger = logging.getLogger(__name__)

MAX_ROUNDS = 3


async def _never_called(**_: Any) -> None:
    """LLMTool needs a function; the runner calls tools through the host instead."""


def llm_tools(ctx: RunnerContext) -> list[LLMTool]:
    return [LLMTool(name=t.tool_name, human_desc=t.description or "", description=t.description or "",
                    parameters=t.parameters or {"type": "object", "properties": {}}, func=_never_called)
            for t in ctx.resources.tools if "call" in t.operations]


class KbTools(Runner):
    async def run(self, ctx: RunnerContext) -> AsyncGenerator[RunnerResult, None]:
        model = ctx.config.get("model") or next((m.model_id for m in ctx.resources.models), "")
        if not model:
            yield RunnerResult.run_failed(ctx.run_id, error="no model is selected for this pipeline")
            return
        funcs = llm_tools(ctx)
        messages = [Message(role="user", content=ctx.input.to_text())]
        answer = Message(role="assistant", content="")
        for _ in range(MAX_ROUNDS):
            answer = await ctx.api.invoke_llm(model, messages, funcs=funcs)
            if not answer.tool_calls:
                break
            messages.append(answer)
            for call in answer.tool_calls:
                try:
                    arguments = json.loads(call.function.arguments or "{}")
                except ValueError:
                    arguments = {}
                try:
                    result = await ctx.api.call_tool(call.function.name, arguments)
                except Exception as e:  # noqa: BLE001 - the model reads the failure
                    logger.warning("tool %s failed: %s", call.function.name, e)
                    result = f"error: {e}"
                content = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
                messages.append(Message(role="tool", content=content, tool_call_id=call.id))
        yield RunnerResult.run_completed(run_id=ctx.run_id, message=Message(role="assistant", content=answer.content),
                                         finish_reason="stop")
