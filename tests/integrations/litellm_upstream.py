"""A fake model provider on loopback for the LiteLLM proxy tests: it records every request body
it receives and answers in the shape of the route (OpenAI chat, Anthropic messages, OpenAI
Responses), so the proxy takes it for the real upstream."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USAGE_CHAT = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}


def _chat(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "done"},
                "finish_reason": "stop",
            }
        ],
        "usage": USAGE_CHAT,
    }


def _anthropic(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "fake"),
        "content": [{"type": "text", "text": "done"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }


def _responses(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "model": body.get("model", "fake"),
        "output": [
            {
                "type": "message",
                "id": "msg_fake",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "done", "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 2,
            "total_tokens": 12,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


ANSWERS = {"/v1/chat/completions": _chat, "/v1/messages": _anthropic, "/v1/responses": _responses}


@dataclass(frozen=True)
class Received:
    """One request the upstream received."""

    path: str
    body: dict[str, Any]


#: What Anthropic answers when it is overloaded (HTTP 529), the error LiteLLM falls back on.
OVERLOADED = (
    529,
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
)


class FakeUpstream:
    """The fake provider: ``with FakeUpstream() as up: ... up.base_url ... up.received``.

    ``failing``, a (status, body) pair, makes it record every request and answer each with
    that error instead (``OVERLOADED``: an Anthropic upstream that is down); ``answers``
    replaces the answer of some routes (an agent's model that calls tools).
    """

    def __init__(
        self,
        failing: tuple[int, dict[str, Any]] | None = None,
        answers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] | None = None,
    ) -> None:
        self.received: list[Received] = []
        self._lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                path = self.path.split("?", 1)[0]
                answer = (answers or {}).get(path) or ANSWERS.get(path)
                if answer is None:
                    self._reply(404, {"error": {"message": f"no route {path}"}})
                    return
                body = json.loads(raw)
                with upstream._lock:
                    upstream.received.append(Received(path, body))
                if failing is not None:
                    self._reply(*failing)
                    return
                self._reply(200, answer(body))

            def _reply(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def take(self) -> list[Received]:
        """The requests received since the last call, oldest first."""
        with self._lock:
            out, self.received = self.received, []
        return out

    def __enter__(self) -> FakeUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
