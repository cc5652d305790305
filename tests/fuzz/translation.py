"""Translation between providers, for the atheris harness (``api.py``): inputs that open with
``TRANSLATION`` fuzz ``rb.translate`` and ``rb.translate_body`` (issue 34).

The bytes pick a source and a target among the five providers, mutate the source's session
(``api.mutate``: hostile objects, changed and deep values), sometimes make a tools list or a
summarizer hostile, and translate the history or a body holding it. Any exception that is not
a ``RingboundError`` is a finding; so is a translation the target's own validator refuses
(``rb.validate`` of what ``translate`` returned).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import atheris
import orjson

import ringbound as rb

#: The prefix that sends an input here.
TRANSLATION = b"ringbound-translation:"

#: Where each provider's body holds its history.
HISTORY = {
    "openai_chat": "messages",
    "openai_responses": "input",
    "anthropic": "messages",
    "gemini": "contents",
    "bedrock_converse": "messages",
}


def run(
    fdp: atheris.FuzzedDataProvider,
    sessions: dict[str, list[Any]],
    tools: dict[str, Any],
    mutate: Callable[[atheris.FuzzedDataProvider, list[Any]], list[Any]],
    hostile: Callable[[atheris.FuzzedDataProvider], Any],
) -> None:
    providers = sorted(sessions)
    source = providers[fdp.ConsumeIntInRange(0, len(providers) - 1)]
    target = providers[fdp.ConsumeIntInRange(0, len(providers) - 1)]
    messages = mutate(fdp, copy.deepcopy(sessions[source]))
    given_tools = copy.deepcopy(tools[source]) if fdp.ConsumeBool() else None
    if given_tools is not None and fdp.ConsumeIntInRange(0, 5) == 0:
        given_tools = hostile(fdp)
    options: dict[str, Any] = {
        "reasoning": ("drop", "text")[fdp.ConsumeIntInRange(0, 1)],
        "unsupported": ("refuse", "placeholder")[fdp.ConsumeIntInRange(0, 1)],
    }
    if fdp.ConsumeIntInRange(0, 3) == 0:
        reply = hostile(fdp) if fdp.ConsumeBool() else fdp.ConsumeUnicode(100)
        options["summarizer"] = lambda _request: reply
    if fdp.ConsumeBool():
        try:
            body = orjson.dumps({"model": "m", HISTORY[source]: messages, "max_tokens": 50})
        except (TypeError, orjson.JSONEncodeError):
            return  # hostile objects: the harness has no body to write
        try:
            rb.translate_body(body, source=source, target=target, **options)
        except rb.RingboundError:
            pass
        return
    try:
        translated = rb.translate(
            messages, source=source, target=target, tools=given_tools, **options
        )
    except rb.RingboundError:
        return
    issues = rb.validate(list(translated.messages), provider=target, system=translated.system)
    assert not issues, (source, target, issues)
