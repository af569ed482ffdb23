"""Scripted fake model servers on 127.0.0.1, for driving the real coding agents offline.

Each server speaks one wire API the agents use:

- :class:`AnthropicServer`: the Anthropic Messages API (``POST /v1/messages``, streaming SSE);
- :class:`GeminiServer`: the Gemini API (``:streamGenerateContent?alt=sse`` and
  ``:generateContent``);
- :class:`ResponsesServer`: the OpenAI Responses API (``POST /v1/responses``, streaming SSE);
- :class:`ChatServer`: the OpenAI chat-completions API (``POST /v1/chat/completions``).

A server plays a fixed script: a list of :class:`ToolCall` steps (one per model turn) and a
final text answer. Which step a request gets is decided from the conversation it carries (the
number of tool results in it), not from a request counter, so retries and side requests (titles,
token counts, next-speaker checks) cannot push the script forward. A request that offers none of
the script's tools is a side request and gets the final text. Every request is recorded
(:attr:`FakeModel.requests`) so a test can show what the agent sent.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

_ids = itertools.count(1)


@dataclass(frozen=True)
class ToolCall:
    """One model turn that asks for one tool call. ``args`` is a JSON object for function tools,
    or a string for a free-form (custom) tool such as Codex's ``apply_patch``."""

    name: str
    args: dict[str, Any] | str


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    step: int | None = None


@dataclass
class FakeModel:
    """The HTTP server plumbing; subclasses implement :meth:`respond`."""

    script: list[ToolCall]
    final_text: str = "All done."
    requests: list[Recorded] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _body(self) -> Any:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                if self.headers.get("Content-Encoding") == "gzip":
                    import gzip
                    raw = gzip.decompress(raw)
                elif self.headers.get("Content-Encoding") == "zstd":
                    import zstandard
                    raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
                try:
                    return json.loads(raw) if raw else None
                except ValueError:
                    return raw.decode("utf-8", "replace")

            def _handle(self) -> None:
                body = self._body() if self.command in ("POST", "PUT", "PATCH") else None
                rec = Recorded(self.command, self.path, dict(self.headers.items()), body)
                with owner._lock:
                    owner.requests.append(rec)
                try:
                    status, headers, payload = owner.respond(rec)
                except Exception as exc:  # a bug in the fake: show it to the agent and the test
                    status, headers, payload = 500, {"Content-Type": "text/plain"}, repr(exc)
                data = payload.encode() if isinstance(payload, str) else payload
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # lifecycle --------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    # scripting --------------------------------------------------------------------------------

    def respond(self, rec: Recorded) -> tuple[int, dict[str, str], str | bytes]:
        raise NotImplementedError

    def tool_names(self) -> set[str]:
        return {c.name for c in self.script}

    def step_for(self, rec: Recorded, results: int, offered: set[str]) -> int | None:
        """The script step for a request holding ``results`` tool results and offering the
        tools ``offered``: None for a side request (final text)."""
        if not self.tool_names() & offered:
            return None
        rec.step = results
        return results

    def summary(self) -> str:
        """What the agent sent, one line a request, for assertion messages."""
        lines = []
        for r in self.requests:
            lines.append(f"{r.method} {r.path} step={r.step}")
        return "\n".join(lines) or "(no requests)"


def sse(events: list[tuple[str | None, dict[str, Any]]]) -> str:
    out = []
    for name, data in events:
        if name:
            out.append(f"event: {name}\n")
        out.append(f"data: {json.dumps(data)}\n\n")
    return "".join(out)


SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
JSON_HEADERS = {"Content-Type": "application/json"}


# Anthropic Messages ---------------------------------------------------------------------------


class AnthropicServer(FakeModel):
    """``POST /v1/messages``; the step is the number of ``tool_result`` blocks sent."""

    def respond(self, rec: Recorded) -> tuple[int, dict[str, str], str | bytes]:
        path = urlsplit(rec.path).path
        if rec.method != "POST" or not path.endswith("/messages"):
            if path.endswith("/count_tokens"):
                return 200, JSON_HEADERS, json.dumps({"input_tokens": 10})
            return 404, JSON_HEADERS, json.dumps(
                {"type": "error", "error": {"type": "not_found_error", "message": path}})
        body = rec.body if isinstance(rec.body, dict) else {}
        results = sum(1 for m in body.get("messages", []) if isinstance(m.get("content"), list)
                      for b in m["content"] if isinstance(b, dict)
                      and b.get("type") == "tool_result")
        offered = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        step = self.step_for(rec, results, offered)
        model = body.get("model", "claude-sonnet-4-5")
        call = self.script[step] if step is not None and step < len(self.script) else None
        msg_id = f"msg_fake{next(_ids):04d}"
        if call is None:
            block = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": self.final_text}]
            full = {"type": "text", "text": self.final_text}
            stop = "end_turn"
        else:
            tid = f"toolu_fake{next(_ids):04d}"
            block = {"type": "tool_use", "id": tid, "name": call.name, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(call.args)}]
            full = {**block, "input": call.args}
            stop = "tool_use"
        usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        if not body.get("stream"):
            return 200, JSON_HEADERS, json.dumps(
                {"id": msg_id, "type": "message", "role": "assistant", "model": model,
                 "content": [full], "stop_reason": stop, "stop_sequence": None, "usage": usage})
        events: list[tuple[str | None, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": {
                "id": msg_id, "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": block})]
        events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": d}) for d in deltas]
        events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                   ("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": 5}}),
                   ("message_stop", {"type": "message_stop"})]
        return 200, SSE_HEADERS, sse(events)


# Gemini ---------------------------------------------------------------------------------------


class GeminiServer(FakeModel):
    """``models/<m>:streamGenerateContent?alt=sse`` and ``:generateContent``; the step is the
    number of ``functionResponse`` parts sent. Other calls (``countTokens``) get trivial
    answers."""

    def respond(self, rec: Recorded) -> tuple[int, dict[str, str], str | bytes]:
        path = urlsplit(rec.path).path
        body = rec.body if isinstance(rec.body, dict) else {}
        if path.endswith(":countTokens"):
            return 200, JSON_HEADERS, json.dumps({"totalTokens": 10})
        if not path.endswith((":streamGenerateContent", ":generateContent")):
            return 404, JSON_HEADERS, json.dumps(
                {"error": {"code": 404, "message": path, "status": "NOT_FOUND"}})
        results = sum(1 for c in body.get("contents", []) for p in c.get("parts") or []
                      if isinstance(p, dict) and "functionResponse" in p)
        offered = {d.get("name") for t in body.get("tools") or [] if isinstance(t, dict)
                   for d in t.get("functionDeclarations") or []}
        step = self.step_for(rec, results, offered)
        call = self.script[step] if step is not None and step < len(self.script) else None
        if call is not None:
            part: dict[str, Any] = {"functionCall": {"name": call.name, "args": call.args}}
        elif (body.get("generationConfig") or {}).get("responseMimeType") == "application/json":
            # a side request for JSON (next-speaker check and the like): the user speaks next
            part = {"text": json.dumps({"reasoning": "The task is done.",
                                        "next_speaker": "user"})}
        else:
            part = {"text": self.final_text}
        chunk = {"candidates": [{"content": {"role": "model", "parts": [part]},
                                 "finishReason": "STOP", "index": 0}],
                 "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                                   "totalTokenCount": 15},
                 "modelVersion": path.rsplit("/", 1)[-1].split(":")[0],
                 "responseId": f"resp_fake{next(_ids):04d}"}
        if path.endswith(":generateContent"):
            return 200, JSON_HEADERS, json.dumps(chunk)
        return 200, SSE_HEADERS, f"data: {json.dumps(chunk)}\r\n\r\n"


# OpenAI Responses -----------------------------------------------------------------------------


class ResponsesServer(FakeModel):
    """``POST /v1/responses`` (streaming); the step is the number of tool outputs sent
    (``function_call_output`` / ``custom_tool_call_output`` input items). A string ``args``
    becomes a ``custom_tool_call`` (free-form tool), a dict a ``function_call``."""

    def respond(self, rec: Recorded) -> tuple[int, dict[str, str], str | bytes]:
        path = urlsplit(rec.path).path
        body = rec.body if isinstance(rec.body, dict) else {}
        if rec.method == "GET" and path.endswith("/models"):
            return 200, JSON_HEADERS, json.dumps({"object": "list", "data": [], "models": []})
        if rec.method != "POST" or not path.endswith("/responses"):
            return 404, JSON_HEADERS, json.dumps({"error": {"message": path}})
        items = body.get("input") if isinstance(body.get("input"), list) else []
        results = sum(1 for i in items if isinstance(i, dict) and i.get("type") in (
            "function_call_output", "custom_tool_call_output"))
        offered = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        step = self.step_for(rec, results, offered)
        call = self.script[step] if step is not None and step < len(self.script) else None
        n = next(_ids)
        if call is None:
            item: dict[str, Any] = {
                "type": "message", "id": f"msg_fake{n:04d}", "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": self.final_text,
                             "annotations": []}]}
        elif isinstance(call.args, str):
            item = {"type": "custom_tool_call", "id": f"ctc_fake{n:04d}",
                    "call_id": f"call_fake{n:04d}", "name": call.name, "input": call.args,
                    "status": "completed"}
        else:
            item = {"type": "function_call", "id": f"fc_fake{n:04d}",
                    "call_id": f"call_fake{n:04d}", "name": call.name,
                    "arguments": json.dumps(call.args), "status": "completed"}
        resp = {"id": f"resp_fake{n:04d}", "object": "response", "created_at": int(time.time()),
                "status": "in_progress", "model": body.get("model", "gpt-5.5"), "output": []}
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": 15}
        done = {**resp, "status": "completed", "output": [item], "usage": usage}
        events: list[tuple[str | None, dict[str, Any]]] = [
            ("response.created", {"type": "response.created", "sequence_number": 0,
                                  "response": resp}),
            ("response.output_item.added", {"type": "response.output_item.added",
                                            "sequence_number": 1, "output_index": 0,
                                            "item": item}),
            ("response.output_item.done", {"type": "response.output_item.done",
                                           "sequence_number": 2, "output_index": 0,
                                           "item": item}),
            ("response.completed", {"type": "response.completed", "sequence_number": 3,
                                    "response": done})]
        return 200, SSE_HEADERS, sse(events)


# OpenAI chat completions ----------------------------------------------------------------------


class ChatServer(FakeModel):
    """``POST /v1/chat/completions`` (streaming or not); the step is the number of ``tool``
    messages sent. ``GET /v1/models`` lists one model."""

    model: str = "fake-model"

    def respond(self, rec: Recorded) -> tuple[int, dict[str, str], str | bytes]:
        path = urlsplit(rec.path).path
        body = rec.body if isinstance(rec.body, dict) else {}
        if rec.method == "GET" and path.endswith("/models"):
            return 200, JSON_HEADERS, json.dumps(
                {"object": "list", "data": [{"id": self.model, "object": "model",
                                             "created": 0, "owned_by": "fake"}]})
        if rec.method != "POST" or not path.endswith("/chat/completions"):
            return 404, JSON_HEADERS, json.dumps({"error": {"message": path}})
        results = sum(1 for m in body.get("messages", []) if isinstance(m, dict)
                      and m.get("role") == "tool")
        offered = {(t.get("function") or {}).get("name") for t in body.get("tools") or []
                   if isinstance(t, dict)}
        step = self.step_for(rec, results, offered)
        call = self.script[step] if step is not None and step < len(self.script) else None
        n = next(_ids)
        base = {"id": f"chatcmpl-fake{n:04d}", "created": int(time.time()),
                "model": body.get("model", self.model)}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if call is None:
            message: dict[str, Any] = {"role": "assistant", "content": self.final_text}
            finish = "stop"
        else:
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_fake{n:04d}", "type": "function",
                 "function": {"name": call.name, "arguments": json.dumps(call.args)}}]}
            finish = "tool_calls"
        if not body.get("stream"):
            return 200, JSON_HEADERS, json.dumps(
                {**base, "object": "chat.completion", "usage": usage, "choices": [
                    {"index": 0, "message": message, "finish_reason": finish}]})
        delta = dict(message)
        if "tool_calls" in delta:
            delta["tool_calls"] = [{"index": 0, **tc} for tc in delta["tool_calls"]]
        chunk = {**base, "object": "chat.completion.chunk"}
        events: list[tuple[str | None, dict[str, Any]]] = [
            (None, {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
            (None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                    "usage": usage})]
        return 200, SSE_HEADERS, sse(events) + "data: [DONE]\n\n"


# Augment's own API (Auggie) -------------------------------------------------------------------


class AugmentServer(FakeModel):
    """The Augment service Auggie talks to (its ``tenantURL``): ``POST /get-models`` names one
    model and turns on the ``enable_hooks`` feature flag (Auggie runs hooks only where the
    service enables them), ``POST /chat-stream`` answers with newline-delimited
    ``BackChatResult`` lines whose ``nodes`` hold a ``tool_use`` (node type 5). The step is the
    number of ``tool_result`` request nodes (type 1) in the request and its ``chat_history``.
    Every other call (MCP configs, remote tools, error reports) gets an empty answer."""

    model: str = "fake-model"

    def respond(self, rec: Recorded) -> tuple[int, dict[str, str], str | bytes]:
        path = urlsplit(rec.path).path.strip("/")
        body = rec.body if isinstance(rec.body, dict) else {}
        if path == "get-models":
            return 200, JSON_HEADERS, json.dumps({
                "default_model": self.model,
                "models": [{"name": self.model, "suggested_prefix_char_count": 1000,
                            "suggested_suffix_char_count": 1000}],
                "feature_flags": {"enable_hooks": True}})
        if path == "agents/list-remote-tools":
            return 200, JSON_HEADERS, json.dumps({"tools": []})
        if path != "chat-stream":
            return 200, JSON_HEADERS, "{}"
        nodes = list(body.get("nodes") or [])
        for exchange in body.get("chat_history") or []:
            nodes += exchange.get("request_nodes") or []
        results = sum(1 for n in nodes if isinstance(n, dict) and n.get("type") == 1)
        offered = {t.get("name") for t in body.get("tool_definitions") or []
                   if isinstance(t, dict)}
        step = self.step_for(rec, results, offered)
        call = self.script[step] if step is not None and step < len(self.script) else None
        if call is None:
            line = {"text": self.final_text, "stop_reason": 1,
                    "nodes": [{"id": 0, "type": 0, "content": self.final_text}]}
        else:
            line = {"text": "", "stop_reason": 3, "nodes": [{"id": 1, "type": 5, "tool_use": {
                "tool_use_id": f"toolu_fake{next(_ids):04d}", "tool_name": call.name,
                "input_json": json.dumps(call.args)}}]}
        return 200, JSON_HEADERS, json.dumps(line) + "\n"
