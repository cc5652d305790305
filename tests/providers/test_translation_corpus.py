"""The real sessions of the shared corpus translated across all 20 ordered pairs: each Chat
session (tau-bench, swe-gym with its tools, swe-agent) written for the four other providers,
each of those written for the three others and back to Chat, and the Claude Code logs
(Anthropic, with thinking blocks) written for the four others. Every output passes the
target's validator, keeps the calls in order and every text the source's provider reads.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from test_corpus import (
    cut_after_last_user_or_tool,
    swe_agent,
    swe_agent_messages,
    swe_gym,
    tau_bench,
)
from test_translation import calls, texts

import ringbound as rb
from ringbound.providers import PROVIDERS

OTHERS = [p for p in PROVIDERS if p != "openai_chat"]


def chat_sessions(corpus: Path) -> list[tuple[list[Any], list[Any] | None]]:
    out: list[tuple[list[Any], list[Any] | None]] = [(s["traj"], None) for s in tau_bench(corpus)]
    out += [(cut_after_last_user_or_tool(s["messages"]), s["tools"]) for s in swe_gym(corpus)]
    out += [(swe_agent_messages(h), None) for h in swe_agent(corpus).values()]
    return out


def claude_code(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """The Claude Code logs as the Anthropic requests they rebuild, read as the Anthropic
    tests read them."""
    spec = importlib.util.spec_from_file_location(
        "anthropic_corpus_for_translation", Path(__file__).parent / "test_anthropic.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return [
        module._conversation(module._events(p))[0]
        for p in sorted((corpus / "claude-code").glob("*.jsonl"))
    ]


def check(source: str, target: str, messages: list[Any], system: Any, tools: Any) -> rb.Translation:
    out = rb.translate(
        messages,
        source=source,
        target=target,
        system=system,
        tools=tools,
        unsupported="placeholder",
    )
    assert rb.validate(out.messages, provider=target, system=out.system) == [], (source, target)
    assert list(calls(out.messages)) == list(calls(messages)), (source, target)
    got = "\x00".join([*texts(out.messages), *texts(out.system), *texts({"text": out.system})])
    want = [t for t in [*texts(messages), *texts(system), *texts({"text": system})] if t.strip()]
    assert [t for t in want if t not in got][:1] == [], (source, target)
    if tools:
        assert out.tools, (source, target)
    return out


def test_every_chat_session_crosses_every_pair(corpus: Path) -> None:
    pairs: set[tuple[str, str]] = set()
    sessions = chat_sessions(corpus)
    assert len(sessions) >= 200
    for messages, tools in sessions:
        for target in OTHERS:
            there = check("openai_chat", target, messages, None, tools)
            pairs.add(("openai_chat", target))
            for onward in PROVIDERS:
                if onward != target:
                    check(target, onward, there.messages, there.system, there.tools)
                    pairs.add((target, onward))
    assert len(pairs) == 20


def test_claude_code_sessions_cross_to_every_provider(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = "You are Claude Code, Anthropic's official CLI for Claude."
    translated = 0
    for messages in claude_code(corpus, monkeypatch):
        if rb.validate(messages, provider="anthropic", system=system):
            # A log whose calls do not pair is refused, as the source's provider refuses it.
            with pytest.raises(rb.PairingError):
                rb.translate(messages, source="anthropic", target="openai_chat", system=system)
            continue
        translated += 1
        for target in PROVIDERS:
            if target != "anthropic":
                out = check("anthropic", target, messages, system, None)
                thinking = sum(
                    1
                    for m in messages
                    if isinstance(m.get("content"), list)
                    for b in m["content"]
                    if isinstance(b, dict) and b.get("type") == "thinking"
                )
                dropped = [c for c in out.report.changes if c.what == "reasoning"]
                assert len(dropped) == thinking
    assert translated >= 1
