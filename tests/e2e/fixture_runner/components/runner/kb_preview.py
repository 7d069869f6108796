"""A minimal agent runner: what LocalAgent does with knowledge bases, and nothing else.

For each message: retrieve from every knowledge base the pipeline granted (through the host, the
same RETRIEVE_KNOWLEDGE_BASE action LocalAgent uses), put each passage's text in a system prompt
as LocalAgent does (`[n] text`: no metadata reaches the model, so a source is there only when the
content carries it), make one LLM call, reply with its answer. No tools, no history.
"""

from __future__ import annotations

import logging
from typing import Any, AsyncGenerator

from langbot_plugin.api.definition.components.runner.runner import Runner
from langbot_plugin.api.entities.builtin.provider.message import Message
from langbot_plugin.api.entities.builtin.runner import RunnerContext, RunnerResult

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Answer the user's question using only the passages below. After each fact, cite the passage's "
    "source in square brackets. If the passages do not contain the answer, say so."
)
NO_PASSAGES = "No passages were found in the knowledge bases for this question."


def passage_text(entry: dict[str, Any]) -> str:
    parts = [c.get("text", "") for c in entry.get("content") or [] if isinstance(c, dict) and c.get("type") == "text"]
    return "\n".join(p for p in parts if p).strip()


def build_system_prompt(passages: list[str], problems: list[str]) -> str:
    blocks = [INSTRUCTIONS, ""]
    if passages:
        for i, text in enumerate(passages, 1):
            blocks.append(f"[{i}] {text}\n")
    else:
        blocks.append(NO_PASSAGES)
    blocks.extend(f"(note: {p})" for p in problems)
    return "\n".join(blocks).strip()


class KbPreview(Runner):
    async def run(self, ctx: RunnerContext) -> AsyncGenerator[RunnerResult, None]:
        question = ctx.input.to_text()
        top_k = int(ctx.config.get("top-k") or 4)
        passages: list[str] = []
        problems: list[str] = []
        for kb in ctx.resources.knowledge_bases:
            if "retrieve" not in kb.operations:
                continue
            try:
                entries = await ctx.api.retrieve_knowledge(kb.kb_id, question, top_k=top_k)
            except Exception as e:  # noqa: BLE001  one failing KB must not hide the others
                logger.warning("retrieval from %s failed: %s", kb.kb_id, e)
                problems.append(f"knowledge base {kb.kb_name or kb.kb_id} could not be searched: {e}")
                continue
            for entry in entries:
                text = passage_text(entry)
                if text:
                    passages.append(text)

        model = ctx.config.get("model") or next((m.model_id for m in ctx.resources.models), "")
        if not model:
            yield RunnerResult.run_failed(ctx.run_id, error="no model is selected for this pipeline")
            return
        answer = await ctx.api.invoke_llm(model, [
            Message(role="system", content=build_system_prompt(passages, problems)),
            Message(role="user", content=question),
        ])
        yield RunnerResult.run_completed(run_id=ctx.run_id, message=Message(role="assistant", content=answer.content),
                                         finish_reason="stop")
