#!/usr/bin/env python3
"""Offline OpenAI-compatible chat model "retrieval-preview": answers with what it was given.

It calls no LLM. Its answer repeats the system prompt it received (for a knowledge-base runner:
the passages and their citations) under a heading, so someone without an API key can bind a
knowledge base to a pipeline and read, in the debug chat, exactly what the bot would be told.
The real-host E2E uses it as its fake LLM: every request is recorded and can be read back.

Scripted tool calls (the real-host E2E of the agent tools): when the request offers `tools` and
the last user message has a line `CALL <tool name> <JSON arguments>`, the answer is that tool call
(`finish_reason: "tool_calls"`, OpenAI's `message.tool_calls`); once `tool` messages follow that
user message, the answer repeats their contents. A model that offers no tools gets the preview.

Endpoints:
  POST /v1/chat/completions, /chat/completions   OpenAI shape; "stream": true answers in SSE chunks
  GET  /v1/models, /models                       a one-model list
  GET  /requests                                 {"requests": [<request bodies>, oldest first]}
  POST /requests/reset                           forget them
  GET  /health                                   "ok"

Usage: offline_llm.py [--host 127.0.0.1] [--port 5700] [--keep 200]   (stdlib only)
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "retrieval-preview"
HEADING = "Retrieval preview (no language model was called). The bot would be told:"


def message_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def preview_answer(messages: list[dict]) -> str:
    """The system prompt(s) verbatim, then the question; an empty prompt says so."""
    system = [message_text(m) for m in messages if isinstance(m, dict) and m.get("role") == "system"]
    question = next((message_text(m) for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"), "")
    told = "\n\n".join(s for s in system if s.strip()) or "(no system prompt: the runner passed no passages)"
    return f"{HEADING}\n\n{told}\n\n---\nQuestion: {question}"


def scripted_tool_call(messages: list[dict], tools: list) -> dict | None:
    """The tool call a `CALL <name> <json>` line of the last user message asks for, if the request
    offers tools and no tool has answered since that message."""
    last_user = max((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"), default=-1)
    if not tools or last_user < 0 or any(m.get("role") == "tool" for m in messages[last_user:] if isinstance(m, dict)):
        return None
    for line in message_text(messages[last_user]).splitlines():
        name, _, arguments = line.strip().removeprefix("CALL ").partition(" ")
        if line.strip().startswith("CALL ") and name:
            return {"id": "call_" + uuid.uuid4().hex[:12], "type": "function",
                    "function": {"name": name, "arguments": arguments.strip() or "{}"}}
    return None


def tool_results(messages: list[dict]) -> str | None:
    """The contents of the `tool` messages after the last user message, if any."""
    last_user = max((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"), default=-1)
    results = [message_text(m) for m in messages[last_user + 1:] if isinstance(m, dict) and m.get("role") == "tool"]
    return "Tool results:\n" + "\n".join(results) if results else None


class Recorder:
    def __init__(self, keep: int) -> None:
        self._lock = threading.Lock()
        self._items: deque[dict] = deque(maxlen=keep)

    def add(self, body: dict) -> None:
        with self._lock:
            self._items.append(body)

    def all(self) -> list[dict]:
        with self._lock:
            return list(self._items)

    def reset(self) -> None:
        with self._lock:
            self._items.clear()


class Handler(BaseHTTPRequestHandler):
    recorder: Recorder
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # one line per request on stderr
        sys.stderr.write("%s %s\n" % (self.log_date_time_string(), fmt % args))

    def _send(self, code: int, obj, ctype: str = "application/json") -> None:
        raw = obj if isinstance(obj, bytes) else json.dumps(obj, ensure_ascii=False).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self):
        path = self.path.split("?")[0].rstrip("/")
        if path in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "lucidrag"}]})
        elif path == "/requests":
            self._send(200, {"requests": self.recorder.all()})
        elif path == "/health":
            self._send(200, b"ok", "text/plain")
        else:
            self._send(404, {"error": {"message": f"no route {path}"}})

    def do_POST(self):
        path = self.path.split("?")[0].rstrip("/")
        try:
            n = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(n) or b"{}")
        except ValueError as e:
            self._send(400, {"error": {"message": f"bad JSON: {e}"}})
            return
        if path == "/requests/reset":
            self.recorder.reset()
            self._send(200, {"ok": True})
            return
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, {"error": {"message": f"no route {path}"}})
            return
        self.recorder.add(body)
        messages = body.get("messages") or []
        call = scripted_tool_call(messages, body.get("tools") or [])
        answer = None if call else tool_results(messages) or preview_answer(messages)
        model = body.get("model") or MODEL
        rid, now = "chatcmpl-" + uuid.uuid4().hex[:12], int(time.time())
        usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        if body.get("stream"):
            self._stream(rid, now, model, answer, usage, call)
            return
        message = ({"role": "assistant", "content": None, "tool_calls": [call]} if call
                   else {"role": "assistant", "content": answer})
        self._send(200, {"id": rid, "object": "chat.completion", "created": now, "model": model,
                         "choices": [{"index": 0, "finish_reason": "tool_calls" if call else "stop",
                                      "message": message}],
                         "usage": usage})

    def _stream(self, rid: str, now: int, model: str, answer: str | None, usage: dict,
                call: dict | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()

        def chunk(delta: dict, finish: str | None) -> bytes:
            obj = {"id": rid, "object": "chat.completion.chunk", "created": now, "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            return b"data: " + json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n\n"

        if call:
            self.wfile.write(chunk({"role": "assistant", "tool_calls": [{**call, "index": 0}]}, None))
            self.wfile.write(chunk({}, "tool_calls"))
        else:
            self.wfile.write(chunk({"role": "assistant", "content": answer}, None))
            self.wfile.write(chunk({}, "stop"))
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=5700)
    ap.add_argument("--keep", type=int, default=200, help="requests kept for GET /requests")
    args = ap.parse_args()
    Handler.recorder = Recorder(args.keep)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"offline LLM '{MODEL}' on http://{args.host}:{args.port}/v1", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
