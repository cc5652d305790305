"""LangChain's own fake chat model, made to bind tools and record every request it receives,
and the checks every LangChain test makes of those requests."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

import ringbound as rb


class RecordingFakeModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` answering from its script, recording each request's messages
    and the tools bound for it."""

    requests: list[tuple[list[BaseMessage], list[dict[str, Any]]]] = Field(default_factory=list)
    bound: list[dict[str, Any]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.bound = [convert_to_openai_tool(t) for t in tools]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.requests.append((list(messages), list(self.bound)))
        return super()._generate(messages, *args, **kwargs)


def script(turns: int, first: str = "send_email") -> list[AIMessage]:
    """One side-effecting call, ``turns - 1`` reads, then a final answer."""
    out = [
        AIMessage(
            content="",
            tool_calls=[
                {
                    "id": f"call_{i}",
                    "name": first if i == 0 else "read_log",
                    "args": {"to": "ana@example.com"} if i == 0 else {"day": i},
                }
            ],
        )
        for i in range(turns)
    ]
    return [*out, AIMessage(content="All logs read; the email went out.")]


def check_requests(
    requests: list[tuple[list[BaseMessage], list[dict[str, Any]]]], budget: int
) -> list[int]:
    """Every request fits ``budget`` counted as OpenAI Chat, pairs, and has at most one system
    block, at its head (what ChatAnthropic accepts); returns the token count of each."""
    counts = []
    for messages, tools in requests:
        chat = convert_to_openai_messages(messages)
        tokens = rb.count_tokens(chat, tools=tools or None)
        assert tokens <= budget, (tokens, budget)
        assert rb.validate(chat) == []
        roles = [m["role"] for m in chat]
        head = 0
        while head < len(roles) and roles[head] == "system":
            head += 1
        assert "system" not in roles[head:], roles
        counts.append(tokens)
    return counts


class FamilyFakeModel(RecordingFakeModel):
    """A fake standing for a provider's chat model: the fields LangChain's partner classes
    carry (the model's name, ``max_tokens``, ``use_responses_api``) and a ``profile``."""

    model: str = "fake"
    max_tokens: int | None = None
    use_responses_api: bool | None = None


#: One fake per provider family, each named as the partner class it stands for (the
#: integration reads the provider from the class name, the partner packages being optional).
FAMILY_FAKES = {
    provider: type(name, (FamilyFakeModel,), {"__module__": __name__})
    for provider, name in [
        ("openai_chat", "ChatOpenAI"),
        ("anthropic", "ChatAnthropic"),
        ("gemini", "ChatGoogleGenerativeAI"),
        ("bedrock_converse", "ChatBedrockConverse"),
    ]
}
