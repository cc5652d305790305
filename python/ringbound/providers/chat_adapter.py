"""OpenAI Chat Completions seen through the adapter interface. The everyday path plans chat
messages in the core and builds the request there; an assembly that writes a summary note
plans, calls the summarizer, then renders, and this adapter is how it renders chat."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from .. import _core
from .._core import Insertion
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
        issues = _core.validate("openai_chat", dump_messages(messages))
        return [PairingIssue(*t) for t in issues]

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
            match item:
                case int():
                    out.append(messages[item])
                case Insertion.Synthesized(call_id=call_id):
                    out.append(openai_chat.synthesized_result(call_id))
                case Insertion.LedgerNote(text=text, role=role):
                    out.append(openai_chat.ledger_note(text, role))
                case Insertion.Summary(text=text, role=role):
                    out.append(openai_chat.summary_note(text, role))
                case Insertion.Rewrite(index=k, kind=kind, text=text):
                    out.append(openai_chat.rewritten(messages[k], kind, text))
        return Rendered(messages=out, system=system)

    def tools_to_openai(self, tools: Sequence[Any]) -> list[Any]:
        return list(tools)


ADAPTER = ChatAdapter()
