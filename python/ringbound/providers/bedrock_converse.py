"""Amazon Bedrock Converse: messages of ``{role, content: [blocks]}`` with a top-level ``system``
block list. Calls are ``toolUse`` blocks of an assistant turn, answered by ``toolResult`` blocks
in the very next user turn; the conversation starts with a user turn and roles alternate.

The core reads the request, checks Bedrock's rules and writes the request a plan describes
(``rust/src/providers/bedrock_converse``), its system and tools included; this module names
the provider's figures. The Python reading and rendering it had are the tests' oracles
(``tests/native_readers/``, ``tests/providers/bedrock_converse_oracle.py``)."""

from __future__ import annotations

from .base import NativeAdapter

__all__ = ["ADAPTER", "BedrockConverseAdapter"]


class BedrockConverseAdapter(NativeAdapter):
    """Amazon Bedrock Converse (``bedrock_converse``).

    Example:
        >>> from ringbound.providers.bedrock_converse import ADAPTER
        >>> messages = [
        ...     {"role": "user", "content": [{"text": "Weather in Paris?"}]},
        ...     {"role": "assistant", "content": [{"toolUse": {
        ...         "toolUseId": "t1", "name": "weather", "input": {"city": "Paris"}}}]},
        ... ]
        >>> [(i.kind, i.index) for i in ADAPTER.validate(messages)]
        [('missing_result', 1)]
    """

    key = "bedrock_converse"
    #: Converse mostly serves Claude; its images are priced by Anthropic's published formula.
    image_formula = "anthropic"
    #: Claude tokens per o200k token: Claude 3.5 Sonnet's tokenizer gives 16% (English), 21%
    #: (math) and 30% (Python code) more tokens than GPT-4o's on the same text; the largest
    #: measured figure is the default (see docs/providers/bedrock_converse.md).
    default_token_ratio = 1.3
    items_field = "messages"
    raw_bytes = True


#: The adapter ``ringbound.providers.adapter("bedrock_converse")`` returns.
ADAPTER = BedrockConverseAdapter()
