"""RingboundHook in a real LiteLLM proxy: the proxy runs as its own process on loopback with
examples/litellm/config.yaml (its models pointed at a fake upstream, each with a twin the hook
has no config for) and a hook with small budgets; long sessions go through the chat, Anthropic
messages and Responses routes. The upstream must receive each request within budget, paired,
with the ledger note, and, outside the history and system, exactly what the twin sent
untouched received. Broken histories get a clean 400 and reach nobody."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import ringbound as rb
from ringbound import _core
from ringbound.integrations.litellm import placed

from .litellm_proxy_process import Proxy, pythonpath, running_proxy
from .litellm_sessions import anthropic_body, chat_body, responses_body
from .litellm_upstream import FakeUpstream, Received

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "litellm"
HERE = Path(__file__).resolve().parent
#: Suffix of the twin of each model: same upstream, no ringbound config.
RAW = "-raw"
TURNS = 30


def _proxy_config(upstream: str) -> dict[str, Any]:
    """The example config, its models sent to ``upstream``, each with an untouched twin."""
    config = yaml.safe_load((EXAMPLE / "config.yaml").read_text(encoding="utf-8"))
    models = []
    for entry in config["model_list"]:
        params = dict(entry["litellm_params"], api_key="sk-fake")
        is_openai = params["model"].startswith("openai/")
        params["api_base"] = upstream + ("/v1" if is_openai else "")
        models.append({"model_name": entry["model_name"], "litellm_params": params})
        models.append({"model_name": entry["model_name"] + RAW, "litellm_params": dict(params)})
    config["model_list"] = models
    return config


def test_the_proxy_imports_the_ringbound_these_tests_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a regular install the tests import ringbound from site-packages: the proxy must
    too, or it finds the repository's copy without its extension (``cannot import name
    '_core' from partially initialized module``). A copy of the package stands for
    site-packages here."""
    site = tmp_path / "site"
    shutil.copytree(
        Path(rb.__file__).parent, site / "ringbound", ignore=shutil.ignore_patterns("__pycache__")
    )
    monkeypatch.setattr(rb, "__file__", str(site / "ringbound" / "__init__.py"))
    child = subprocess.run(
        [sys.executable, "-c", "import ringbound, ringbound._core; print(ringbound.__file__)"],
        env=dict(os.environ, PYTHONPATH=pythonpath()),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert Path(child.stdout.strip()) == site / "ringbound" / "__init__.py"


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as up:
        yield up


@pytest.fixture(scope="module")
def proxy(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    work = tmp_path_factory.mktemp("litellm-proxy")
    (work / "config.yaml").write_text(yaml.safe_dump(_proxy_config(upstream.base_url)))
    shutil.copy(HERE / "litellm_proxy_hook.py", work / "ringbound_hook.py")
    key = "sk-" + secrets.token_hex(32)
    metrics = work / "metrics.jsonl"
    env = dict(
        os.environ,
        LITELLM_MASTER_KEY=key,
        # Offline and light: no cost map download, no admin UI, no database (none is set).
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        DISABLE_ADMIN_UI="True",
        RINGBOUND_TEST_METRICS=str(metrics),
        PYTHONPATH=pythonpath(),
    )
    with running_proxy(work / "config.yaml", env, key, work) as running:
        yield dataclasses.replace(running, metrics=metrics)


@dataclass(frozen=True)
class RouteCase:
    path: str
    provider: str
    history: str
    system: str | None
    model: str
    body: Any


CASES = [
    RouteCase("/v1/chat/completions", "openai_chat", "messages", None, "gpt-4o", chat_body),
    RouteCase("/v1/messages", "anthropic", "messages", "system", "claude-sonnet", anthropic_body),
    RouteCase(
        "/v1/responses", "openai_responses", "input", "instructions", "gpt-4o", responses_body
    ),
]


def _send(proxy: Proxy, upstream: FakeUpstream, case: RouteCase, body: dict[str, Any]) -> Received:
    upstream.take()
    status, answer = proxy.post(case.path, body)
    assert status == 200, answer
    (got,) = upstream.take()
    assert got.path == case.path
    return got


def _ledger_text(case: RouteCase, body: dict[str, Any]) -> str:
    texts = [body.get(case.system)] if case.system else []
    texts += [m.get("content") for m in body[case.history] if isinstance(m, dict)]
    notes = [t for t in texts if isinstance(t, str) and _core.LEDGER_MARKER in t]
    assert len(notes) == 1, texts
    return notes[0]


def _without(body: dict[str, Any], *keys: str | None) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


@pytest.mark.parametrize("case", CASES, ids=[c.provider for c in CASES])
def test_a_long_session_reaches_the_upstream_trimmed_paired_and_otherwise_intact(
    proxy: Proxy, upstream: FakeUpstream, case: RouteCase
) -> None:
    from .litellm_proxy_hook import CONFIG

    sent = case.body(case.model, TURNS)
    history, system = sent[case.history], sent.get(case.system) if case.system else None
    before = rb.count_tokens(history, provider=case.provider, tools=sent["tools"], system=system)
    assert before > CONFIG.budget  # the session must need trimming

    got = _send(proxy, upstream, case, sent).body
    raw = _send(proxy, upstream, case, dict(sent, model=case.model + RAW)).body

    kept, kept_system = got[case.history], got.get(case.system) if case.system else None
    tokens = rb.count_tokens(kept, provider=case.provider, tools=got["tools"], system=kept_system)
    assert tokens <= CONFIG.budget
    assert rb.validate(kept, provider=case.provider, system=kept_system) == []
    assert len(kept) < len(history)
    note = _ledger_text(case, got)
    assert "send_email" in note and "ana@example.com" in note
    # What the hook assembled is what ringbound assembles of the client's body, each kept
    # message as LiteLLM forwards it (the untouched twin shows how: it drops a null
    # ``content``, for one); and every field but the history and system is the same in both
    # requests: the hook changed nothing else.
    expected = rb.Assembler(placed(CONFIG, case.provider), provider=case.provider).assemble(
        history, tools=sent["tools"], system=system
    )
    assert len(raw[case.history]) == len(history)
    forwarded = {id(m): raw[case.history][i] for i, m in enumerate(history)}
    assert kept == [forwarded.get(id(m), m) for m in expected.messages]
    assert kept_system == expected.system
    assert _without(got, case.history, case.system) == _without(raw, case.history, case.system)
    for field in sent:
        if field not in (case.history, case.system, "model", "user"):
            assert got[field] == sent[field], field


@pytest.mark.parametrize("case", CASES, ids=[c.provider for c in CASES])
def test_a_broken_history_gets_a_clean_400_and_reaches_nobody(
    proxy: Proxy, upstream: FakeUpstream, case: RouteCase
) -> None:
    upstream.take()
    status, answer = proxy.post(case.path, case.body(case.model, TURNS, broken=True))
    assert status == 400, answer
    # Each route answers in its own error shape (Anthropic's adds a top-level type).
    if case.provider == "anthropic":
        assert answer["type"] == "error"
    else:
        assert "type" not in answer
    error = answer["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("ringbound: tool call pairing is broken")
    assert error["provider_specific_fields"]["ringbound"]["error"] == "PairingError"
    assert upstream.take() == []


def test_the_proxy_records_each_assembly_through_the_metrics_sink(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    proxy.metrics.unlink(missing_ok=True)
    for case in CASES:
        _send(proxy, upstream, case, case.body(case.model, TURNS))
        upstream.take()
        proxy.post(case.path, case.body(case.model, TURNS, broken=True))
    records = [json.loads(line) for line in proxy.metrics.read_text().splitlines()]
    observed = [r for r in records if r["event"] == "observe"]
    rejected = [r for r in records if r["event"] == "reject"]
    assert [r["provider"] for r in observed] == [c.provider for c in CASES]
    assert all(0 < r["tokens_after"] <= r["budget"] < r["tokens_before"] for r in observed)
    assert all(r["dropped_rings"] > 0 for r in observed)
    assert [(r["provider"], r["error"]) for r in rejected] == [
        (c.provider, "PairingError") for c in CASES
    ]
