"""The gateway path on the reference session as a request body: ``assemble_body`` cached and
cold next to ``orjson.loads`` of the same body, and the load test's app answering each route
(through Starlette's test client: the smoke run has no ``wrk``)."""

from __future__ import annotations

from typing import Any

import body_path
import orjson
import pytest
import workload
from starlette.testclient import TestClient

from ringbound import _core
from ringbound.providers import PROVIDERS

STATES = {"cold": _core.cache_clear, "cached": None}


@pytest.fixture(scope="module")
def chat_body(reference: list[dict[str, Any]]) -> bytes:
    return body_path.body("openai_chat", reference)


@pytest.mark.benchmark(group="body")
@pytest.mark.parametrize("state", list(STATES))
def test_assemble_body(benchmark: Any, chat_body: bytes, state: str) -> None:
    asm = workload.assembler()
    asm.assemble_body(chat_body)
    res = benchmark.pedantic(asm.assemble_body, args=(chat_body,), setup=STATES[state], rounds=10)
    body_path.checked(res, "openai_chat")
    assert res.path == "native"


@pytest.mark.benchmark(group="body")
def test_orjson_loads_anchor(benchmark: Any, chat_body: bytes) -> None:
    assert benchmark(orjson.loads, chat_body)["temperature"] == 0.2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_load_tests_routes_answer(reference: list[dict[str, Any]], provider: str) -> None:
    from gateway_app import app

    data = body_path.body(provider, body_path.history_of(reference))
    history, _ = body_path.KEYS[provider]
    with TestClient(app) as client:
        answers = {
            r: client.post(f"/{r}/{provider}", content=data) for r in ("echo", "dict", "body")
        }
    assert {r: a.status_code for r, a in answers.items()} == dict.fromkeys(answers, 200)
    assert orjson.loads(answers["echo"].content) == orjson.loads(data)
    assert orjson.loads(answers["body"].content) == orjson.loads(answers["dict"].content)
    assert len(orjson.loads(answers["body"].content)[history]) < len(orjson.loads(data)[history])
