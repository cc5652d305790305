"""examples/litellm/config.yaml as shipped, in a real LiteLLM proxy on loopback: the exact file
and its ringbound_hook.py, with only the environment pointing its providers at a fake
upstream. No window is configured anywhere: the hook must size each model from what the proxy
knows (gpt-4o's 128,000 tokens, Claude Sonnet 4.5's 200,000), count it as its provider, and take
each body's max_tokens as the output reserve, on the chat, messages and responses routes."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import ringbound as rb
from ringbound import _core

from .litellm_proxy_process import Proxy, pythonpath, running_proxy
from .litellm_sessions import anthropic_body, chat_body, responses_body
from .litellm_upstream import FakeUpstream

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "litellm" / "config.yaml"
TURNS = 60
#: The windows of the example's models, as their providers document them.
WINDOWS = {"gpt-4o": 128_000, "claude-sonnet": 200_000}


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as up:
        yield up


@pytest.fixture(scope="module")
def proxy(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    key = "sk-" + secrets.token_hex(32)
    env = dict(
        os.environ,
        LITELLM_MASTER_KEY=key,
        OPENAI_API_KEY="sk-fake",
        ANTHROPIC_API_KEY="sk-ant-fake",
        # The providers' own base-URL variables: the config stays exactly as shipped.
        OPENAI_API_BASE=upstream.base_url + "/v1",
        ANTHROPIC_API_BASE=upstream.base_url,
        # Offline and light: no cost map download, no admin UI, no database (none is set).
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        DISABLE_ADMIN_UI="True",
        PYTHONPATH=pythonpath(),
    )
    with running_proxy(CONFIG, env, key, tmp_path_factory.mktemp("litellm-example")) as p:
        yield p


@dataclass(frozen=True)
class Case:
    path: str
    model: str
    body: Any
    reserve_field: str
    reserve: int
    #: The upstream's path and the provider whose shape and count its body has.
    upstream_path: str
    provider: str


CASES = [
    Case("/v1/chat/completions", "gpt-4o", chat_body, "max_tokens", 120_000,
         "/v1/chat/completions", "openai_chat"),
    Case("/v1/messages", "claude-sonnet", anthropic_body, "max_tokens", 190_000,
         "/v1/messages", "anthropic"),
    Case("/v1/responses", "gpt-4o", responses_body, "max_output_tokens", 120_000,
         "/v1/responses", "openai_responses"),
    # A Claude model behind the chat route: LiteLLM translates to Anthropic's messages, and
    # the hook must have counted the request as Anthropic counts it.
    Case("/v1/chat/completions", "claude-sonnet", chat_body, "max_tokens", 190_000,
         "/v1/messages", "anthropic"),
    # And an OpenAI model behind the messages route, which LiteLLM sends to the Responses
    # API (planned as Anthropic counts, which over-counts for OpenAI).
    Case("/v1/messages", "gpt-4o", anthropic_body, "max_tokens", 120_000,
         "/v1/responses", "openai_responses"),
]  # fmt: skip


def _history(provider: str, body: dict[str, Any]) -> tuple[list[Any], Any]:
    if provider == "openai_responses":
        return body["input"], body.get("instructions")
    return body["messages"], body.get("system")


@pytest.mark.parametrize("case", CASES, ids=[f"{c.path}-{c.model}" for c in CASES])
def test_the_shipped_example_fits_each_route_to_its_models_window_less_max_tokens(
    proxy: Proxy, upstream: FakeUpstream, case: Case
) -> None:
    sent = case.body(case.model, TURNS)
    sent[case.reserve_field] = case.reserve
    upstream.take()
    status, answer = proxy.post(case.path, sent)
    assert status == 200, (answer, proxy.log.read_text()[-3000:])
    (got,) = upstream.take()
    assert got.path == case.upstream_path
    history, system = _history(case.provider, got.body)
    tokens = rb.count_tokens(history, provider=case.provider, tools=got.body.get("tools"),
                             system=system)  # fmt: skip
    room = WINDOWS[case.model] - case.reserve
    assert tokens <= room, (tokens, room)
    assert tokens > 0.5 * room  # trimmed to the window, not far below it
    assert rb.validate(history, provider=case.provider, system=system) == []
    sent_history = sent["input" if case.path == "/v1/responses" else "messages"]
    assert len(history) < len(sent_history)
    texts = [system] if isinstance(system, str) else [str(system)]
    texts += [str(m.get("content")) for m in history if isinstance(m, dict)]
    notes = [t for t in texts if _core.LEDGER_MARKER in t]
    assert notes and "send_email" in notes[0]
