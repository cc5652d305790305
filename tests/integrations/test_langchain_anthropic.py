"""A LangChain agent on ChatAnthropic, the real client, against a scripted Messages API on
loopback that records every request body: with ``RingboundMiddleware(provider="anthropic")``
every body fits the budget as ringbound counts Anthropic requests, pairs by Anthropic's rules,
and carries the ledger note in ``system``; ChatAnthropic accepts every request (it refuses a
system message mid-history)."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

import ringbound as rb
from ringbound.integrations.langchain import RingboundMiddleware

PROMPT = "You are the log auditor. " + "Follow the audit rules to the letter. " * 60
TURNS = 12
CFG = rb.AssemblyConfig(
    model_input_limit=3_600,
    output_reserve_tokens=400,
    safety_margin_tokens=100,
    side_effect_tools=["send_email"],
)


@tool
def send_email(to: str) -> str:
    """Send the report by email."""
    return f"sent to {to}"


@tool
def read_log(day: int) -> str:
    """Read one day of logs."""
    return f"day {day}: " + "request served in 12 ms; " * 25


class MessagesAPI(BaseHTTPRequestHandler):
    """POST /v1/messages: records the body, answers the next step of the script (a
    side-effecting call, reads, then a final text)."""

    bodies: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.bodies.append(body)
        i = len(self.bodies) - 1
        if i < TURNS:
            name, args = ("send_email", {"to": "ana@example.com"}) if i == 0 else (
                "read_log", {"day": i})  # fmt: skip
            content = [{"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": "Done."}], "end_turn"
        reply = json.dumps({
            "id": f"msg_{i}", "type": "message", "role": "assistant", "model": body["model"],
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def api() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    bodies: list[dict[str, Any]] = []
    handler = type("Recording", (MessagesAPI,), {"bodies": bodies})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def claude(url: str) -> ChatAnthropic:
    return ChatAnthropic(
        model="claude-sonnet-4-5", api_key="test", base_url=url, max_retries=0, timeout=10
    )


def test_every_body_claude_receives_fits_as_anthropic_counts_it(
    api: tuple[str, list[dict[str, Any]]],
) -> None:
    url, bodies = api
    middleware = RingboundMiddleware(CFG, provider="anthropic")
    agent = create_agent(
        claude(url), [send_email, read_log], system_prompt=PROMPT, middleware=[middleware]
    )
    out = agent.invoke({"messages": [HumanMessage("Email Ana the report, then read the logs.")]})
    assert out["messages"][-1].content == "Done."
    assert len(bodies) == TURNS + 1
    counts = []
    noted = []
    for body in bodies:
        system = body.get("system")
        tokens = rb.count_tokens(
            body["messages"], provider="anthropic", system=system, tools=body.get("tools")
        )
        assert tokens <= CFG.budget, (tokens, CFG.budget)
        assert rb.validate(body["messages"], provider="anthropic", system=system) == []
        assert [t["name"] for t in body["tools"]] == ["send_email", "read_log"]
        text = system if isinstance(system, str) else json.dumps(system)
        assert text.startswith("You are the log auditor.")
        noted.append("[ringbound:side-effect-ledger]" in text and "send_email" in text)
        counts.append(tokens)
    assert max(counts) > 0.8 * CFG.budget
    assert True in noted, "trimming never happened"
    assert all(noted[noted.index(True) :])
    assert len(out["messages"]) == 1 + 2 * TURNS + 1


def test_counted_as_openai_the_same_agent_overflows_claude(
    api: tuple[str, list[dict[str, Any]]],
) -> None:
    """The failure the issue reports: planned with OpenAI's count (as the middleware did
    before it read the provider from the model's class), Claude's requests go over."""
    url, bodies = api
    agent = create_agent(
        claude(url), [send_email, read_log], system_prompt=PROMPT,
        middleware=[RingboundMiddleware(CFG, provider="openai_chat")],
    )  # fmt: skip
    agent.invoke({"messages": [HumanMessage("Email Ana the report, then read the logs.")]})
    worst = max(
        rb.count_tokens(b["messages"], provider="anthropic", system=b.get("system"),
                        tools=b.get("tools"))
        for b in bodies
    )  # fmt: skip
    assert worst > CFG.budget


def test_claude_refuses_a_note_mid_history_and_accepts_every_placement_ringbound_defaults_to(
    api: tuple[str, list[dict[str, Any]]],
) -> None:
    url, bodies = api
    history: list[Any] = [SystemMessage(PROMPT), HumanMessage("Email Ana, then read the logs.")]
    for i in range(TURNS):
        name = "send_email" if i == 0 else "read_log"
        history += [
            AIMessage("", tool_calls=[{"id": f"toolu_{i}", "name": name, "args": {"day": i}}]),
            ToolMessage("log line " * 150, tool_call_id=f"toolu_{i}"),
        ]
    inline = rb.Assembler(dataclasses.replace(CFG, note_placement="inline_system"))
    assert inline.assemble(history).report.ledger_entries == 1
    with pytest.raises(ValueError, match="non-consecutive system messages"):
        claude(url).invoke(inline.assemble(history).messages)
    assert bodies == []
    fitted = rb.Assembler(CFG).assemble(history).messages  # LangChain lists: leading_system
    claude(url).invoke(fitted)
    assert "[ringbound:side-effect-ledger]" in json.dumps(bodies[0]["system"])


def test_with_no_config_the_middleware_sizes_claude_from_chatanthropic_itself(
    api: tuple[str, list[dict[str, Any]]],
) -> None:
    """The real ChatAnthropic class names the provider, its profile the window and its
    ``max_tokens`` the reserve: every body Claude receives fits that window, counted as
    Anthropic, less the body's own ``max_tokens``."""
    url, bodies = api
    window = 4_000
    model = ChatAnthropic(
        model="claude-sonnet-4-5", api_key="test", base_url=url, max_retries=0, timeout=10,
        max_tokens=400, profile={"max_input_tokens": window, "max_output_tokens": 64_000},
    )  # fmt: skip
    middleware = RingboundMiddleware()
    agent = create_agent(model, [send_email, read_log], system_prompt=PROMPT,
                         middleware=[middleware])  # fmt: skip
    agent.invoke({"messages": [HumanMessage("Email Ana the report, then read the logs.")]})
    assert middleware.last_provider == "anthropic"
    counts = []
    for body in bodies:
        assert body["max_tokens"] == 400
        tokens = rb.count_tokens(body["messages"], provider="anthropic",
                                 system=body.get("system"), tools=body.get("tools"))  # fmt: skip
        assert tokens <= window - body["max_tokens"], tokens
        counts.append(tokens)
    assert max(counts) > 0.6 * (window - 400)
    assert middleware.last_report.dropped_rings  # it had to trim
