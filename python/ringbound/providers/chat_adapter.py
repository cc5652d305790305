"""OpenAI Chat Completions seen through the adapter interface. The everyday path plans chat
messages in the core and builds the request there; an assembly that writes a summary note
plans, calls the summarizer, then renders, and this adapter is how it renders chat."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from .. import _core
from ..errors import PairingIssue
from ..payload import dump_messages
from . import openai_chat
from .base import Canonical, PlanItem, Rendered

__all__ = ["ADAPTER", "ChatAdapter"]


class ChatAdapter:
    """The identity adapter: chat messages are the canonical view."""

    key = "openai_chat"
    image_formula = "openai"
    default_token_ratio = 1.0
    items_field = "messages"

    def validate(self, messages: Sequence[Any], *, system: Any = None) -> list[PairingIssue]:
        return [PairingIssue(*t) for t in _core.validate_openai_chat(dump_messages(messages))]

    def to_canonical(self, messages: Sequence[Any], *, system: Any = None) -> Canonical:
        return Canonical(
            messages=[m for part in dump_messages(messages) for m in orjson.loads(part)],
            spans=[(i, i + 1) for i in range(len(messages))],
        )

    def render(
        self,
        messages: Sequence[Any],
        items: Sequence[PlanItem],
        canonical: Canonical,
        *,
        system: Any = None,
    ) -> Rendered:
        out: list[Any] = []
        for item in items:
            if isinstance(item, int):
                out.append(messages[item])
            elif item[0] == "synthesized":
                out.append(openai_chat.synthesized_result(item[1]))
            elif item[0] == "ledger":
                out.append(openai_chat.ledger_note(item[1], item[2]))
            elif item[0] == "summary":
                out.append(openai_chat.summary_note(item[1], item[2]))
            else:
                _, k, kind, text = item
                out.append(openai_chat.rewritten(messages[k], kind, text))
        return Rendered(messages=out, system=system)

    def tools_to_openai(self, tools: Sequence[Any]) -> list[Any]:
        return list(tools)

    def from_canonical(self, messages: Sequence[dict[str, Any]]) -> tuple[list[Any], Any]:
        return list(messages), None


ADAPTER = ChatAdapter()
