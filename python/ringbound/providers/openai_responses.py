"""OpenAI Responses API: the ``input`` items of ``responses.create``. The core reads them,
checks their pairing and maps them onto the canonical view, each part at its real cost
(``rust/src/providers/openai_responses``): calls pair with their outputs by ``call_id`` anywhere
later in the list, a ``reasoning`` item never travels without its model turn, a ``compaction``
item is kept verbatim and the latest one pinned (docs/providers/openai_responses.md). The core
also writes the items a plan describes and reads ``instructions`` and the tools; this module
names the provider's figures, and the Python reading and rendering it had are the tests'
oracles (``tests/native_readers/``, ``tests/providers/openai_responses_oracle.py``)."""

from __future__ import annotations

from .._core import RESPONSES_ITEM_TYPES
from .base import NativeAdapter

__all__ = ["ADAPTER", "OpenAIResponses"]


#: Every input item type read, in the order the refusal lists them: the core's list (one home,
#: rust/src/providers/openai_responses/parse/mod.rs). Its hosted tools' items
#: (``RESPONSES_HOSTED``), which carry their own result, are counted as the JSON they are; an
#: ``mcp_call`` also becomes a call and its result, so its side effect is ledgered.
ITEM_TYPES = RESPONSES_ITEM_TYPES


class OpenAIResponses(NativeAdapter):
    """The Responses API ``input`` list (``system`` is the ``instructions`` parameter)."""

    key = "openai_responses"
    image_formula = "openai"
    #: OpenAI publishes its tokenizers: the counts are exact o200k_base / cl100k_base.
    default_token_ratio = 1.0
    items_field = "input"


#: The adapter ``ringbound.providers.adapter("openai_responses")`` returns.
ADAPTER = OpenAIResponses()
