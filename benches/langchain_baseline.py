"""The LangChain baseline: ``trim_messages`` with an exact tiktoken counter, set up the way
LangChain's docs set it up for chat histories. The counter is the docs' ``tiktoken_counter``
with tool calls and result ids added, in ringbound's accounting, so a budget means the same
number of tokens on both sides."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    convert_to_messages,
    convert_to_openai_messages,
    trim_messages,
)
from pure_python import REPLY_PRIMING, TOKENS_PER_MESSAGE, TOOL_CALL_OVERHEAD, text_tokens

import ringbound as rb

ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}

#: LangChain's recommended settings for chat histories: keep the system message, start the
#: kept history on a human message, end on a human or tool message.
RECOMMENDED: dict[str, Any] = {
    "strategy": "last",
    "include_system": True,
    "start_on": "human",
    "end_on": ("human", "tool"),
}
#: What agent code often uses instead, since an agent history has few human messages and
#: ``start_on="human"`` throws away everything back to the last one.
WITHOUT_START_ON: dict[str, Any] = {"strategy": "last", "include_system": True}


def tiktoken_counter(messages: list[BaseMessage]) -> int:
    n = REPLY_PRIMING
    for msg in messages:
        n += TOKENS_PER_MESSAGE + text_tokens(ROLES[msg.type])
        content = msg.content if isinstance(msg.content, str) else msg.text
        n += text_tokens(content)
        if msg.name:
            n += text_tokens(msg.name) + 1
        if msg.type == "tool":
            n += text_tokens(msg.tool_call_id)
        for call in msg.tool_calls if isinstance(msg, AIMessage) else ():
            n += text_tokens(call["id"]) + text_tokens(call["name"])
            n += text_tokens(json.dumps(call["args"])) + TOOL_CALL_OVERHEAD
    return n


def to_langchain(messages: list[dict[str, Any]]) -> list[BaseMessage]:
    return convert_to_messages(messages)


def trim(lc_messages: list[BaseMessage], budget: int, settings: dict[str, Any]) -> list[Any]:
    return trim_messages(lc_messages, max_tokens=budget, token_counter=tiktoken_counter, **settings)


def breaks_pairing(trimmed: list[BaseMessage]) -> bool:
    """Whether OpenAI would refuse the trimmed history (ringbound's validator's verdict)."""
    return bool(rb.validate(convert_to_openai_messages(trimmed)))
