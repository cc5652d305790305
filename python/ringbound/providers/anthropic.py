"""Anthropic Messages API: the core reads the request, checks Anthropic's own pairing rules
(quoting its 400 wording) and maps it onto the canonical view, each part at its real cost
(``rust/src/providers/anthropic``), and writes the request the plan describes: messages that
alternate, with the ledger note in the top-level ``system``; the core reads the system and the
tools too. This module names the provider's figures; the Python reading and rendering it had
are the tests' oracles (``tests/native_readers/``, ``tests/providers/anthropic_oracle.py``).

The API combines consecutive same-role messages into one turn, so a *turn* (a run of same-role
messages) is the native item here: the core maps it to one canonical assistant message, or one
canonical tool message per ``tool_result`` plus one user message for the rest, all in one group.
"""

from __future__ import annotations

from .base import NativeAdapter

__all__ = ["ADAPTER", "AnthropicAdapter"]


class AnthropicAdapter(NativeAdapter):
    """The Anthropic Messages API (``/v1/messages``).

    The core's check also drops what the API ignores before the latest ``compaction``
    block.
    """

    key = "anthropic"
    image_formula = "anthropic"
    #: Claude tokens per o200k token: Claude's tokenizer (Claude 3 to 4.6) measured at +16%
    #: (English), +21% (math), +30% (Python) against GPT-4o's o200k; the top of that range.
    default_token_ratio = 1.3
    items_field = "messages"


#: The adapter ``ringbound.providers.adapter("anthropic")`` returns.
ADAPTER = AnthropicAdapter()
