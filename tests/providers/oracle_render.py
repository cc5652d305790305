"""The Python rendering of each native provider (``render`` of its ``*_oracle.py`` module) by
provider key: the core writes those requests, and tests hold what it writes to this rendering.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anthropic_oracle
import bedrock_converse_oracle
import gemini_oracle
import openai_responses_oracle

from ringbound.adapted import NativeRequest
from ringbound.providers.base import Canonical, PlanItem, Rendered, guarded

__all__ = ["ORACLES", "render", "rendered"]

#: The oracle module of each provider the core writes requests for.
ORACLES: dict[str, Any] = {
    "anthropic": anthropic_oracle,
    "bedrock_converse": bedrock_converse_oracle,
    "gemini": gemini_oracle,
    "openai_responses": openai_responses_oracle,
}


def render(
    provider: str,
    messages: Sequence[Any],
    items: Sequence[PlanItem],
    canonical: Canonical,
    *,
    system: Any = None,
) -> Rendered:
    """The request the plan describes, as the provider's adapter rendered it in Python."""
    return ORACLES[provider].render(messages, items, canonical, system=system)


def rendered(request: NativeRequest, items: Sequence[PlanItem]) -> Rendered:
    """The plan's items rendered as ``request.render(items)`` rendered them for these providers:
    with the request's own canonical view and system, and an exception the caller's objects
    raise while read made a malformed message (``guarded``)."""
    oracle = ORACLES[request.adapter.key]
    return guarded(
        lambda m: oracle.render(m, items, request.canonical, system=request.system),
        request.messages,
    )
