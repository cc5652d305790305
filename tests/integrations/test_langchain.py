"""LangChain and LangGraph through their own machinery: ``create_agent`` with
``RingboundMiddleware`` and a hand-built LangGraph graph with ``pre_model_hook``, each driven
by LangChain's fake chat model over enough turns that trimming happens."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

import ringbound as rb
from ringbound.integrations.langchain import RingboundMiddleware, pre_model_hook

from .fake_chat import RecordingFakeModel, check_requests, script

PROMPT = "You are the log auditor. " + "Follow the audit rules to the letter. " * 60
TURNS = 14
CFG = rb.AssemblyConfig(
    model_input_limit=2_400,
    output_reserve_tokens=400,
    safety_margin_tokens=100,
    side_effect_tools=["send_email"],
)


@tool
def send_email(to: str) -> str:
    """Send the report by email."""
    return f"sent to {to}"


@tool
def read_log(day: int) -> str:
    """Read one day of logs."""
    return f"day {day}: " + "request served in 12 ms; " * 25


TOOLS = [send_email, read_log]


def ledgered(messages: list[Any]) -> bool:
    return any(
        isinstance(m, SystemMessage)
        and isinstance(m.content, str)
        and "[ringbound:side-effect-ledger]" in m.content
        and "send_email" in m.content
        for m in messages
    )


def test_create_agent_with_the_middleware_fits_every_call_and_keeps_the_state() -> None:
    model = RecordingFakeModel(messages=iter(script(TURNS)))
    middleware = RingboundMiddleware(CFG)
    agent = create_agent(model, TOOLS, system_prompt=PROMPT, middleware=[middleware])
    out = agent.invoke({"messages": [HumanMessage("Email Ana the report, then read the logs.")]})
    assert len(model.requests) == TURNS + 1
    counts = check_requests(model.requests, CFG.budget)
    # The prompt and the tools were counted: without them the history alone would fit longer.
    assert max(counts) > CFG.budget * 0.8
    trimmed = [i for i, (msgs, _) in enumerate(model.requests) if not ledgered(msgs)]
    # Once the email's ring is dropped, every request carries the ledger note.
    first_noted = len(trimmed)
    assert first_noted < TURNS, "trimming never happened"
    assert trimmed == list(range(first_noted))
    for messages, tools in model.requests:
        assert messages[0].content.startswith(PROMPT)
        assert [t["function"]["name"] for t in tools] == ["send_email", "read_log"]
        assert messages[1].content.startswith("Email Ana")
    # The state kept every message: the goal, 14 calls and results, the answer.
    assert len(out["messages"]) == 1 + 2 * TURNS + 1
    assert not any(ledgered([m]) for m in out["messages"])
    assert middleware.last_report.dropped_rings


def test_the_middleware_serves_async_agents() -> None:
    model = RecordingFakeModel(messages=iter(script(TURNS)))
    agent = create_agent(model, TOOLS, system_prompt=PROMPT, middleware=[RingboundMiddleware(CFG)])
    asyncio.run(agent.ainvoke({"messages": [HumanMessage("Email Ana, then read the logs.")]}))
    assert len(model.requests) == TURNS + 1
    check_requests(model.requests, CFG.budget)
    assert ledgered(model.requests[-1][0])


def test_a_langgraph_graph_with_the_hook_counts_the_prompt_and_the_tools() -> None:
    model = RecordingFakeModel(messages=iter(script(TURNS)))
    bound = model.bind_tools(TOOLS)
    hook = pre_model_hook(CFG, prompt=PROMPT, tools=TOOLS)

    def agent(state: MessagesState) -> dict[str, Any]:
        fitted = hook(state)["llm_input_messages"]
        return {"messages": [bound.invoke([SystemMessage(PROMPT), *fitted])]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    out = graph.compile().invoke({"messages": [HumanMessage("Email Ana, then read the logs.")]})
    assert len(model.requests) == TURNS + 1
    counts = check_requests(model.requests, CFG.budget)
    assert max(counts) > CFG.budget * 0.8
    assert ledgered(model.requests[-1][0])
    # The notes follow the prompt: a system block at the head, as ChatAnthropic wants it.
    assert model.requests[-1][0][1].content.startswith("[ringbound:side-effect-ledger]")
    assert len(out["messages"]) == 1 + 2 * TURNS + 1


def test_without_the_prompt_and_tools_the_hook_would_overflow() -> None:
    """The failure the issue reports: a hook blind to the prompt and the tools lets the
    request grow past the budget."""
    history: list[Any] = [HumanMessage("Email Ana, then read the logs.")]
    for i, call in enumerate(script(TURNS)[:-1]):
        history += [call, ToolMessage(read_log.invoke({"day": i}), tool_call_id=f"call_{i}")]
    blind = pre_model_hook(CFG)({"messages": history})["llm_input_messages"]
    seeing = pre_model_hook(CFG, prompt=PROMPT, tools=TOOLS)({"messages": history})
    full = [SystemMessage(PROMPT)]
    tools = [convert_to_openai_tool(t) for t in TOOLS]
    over = rb.count_tokens(convert_to_openai_messages([*full, *blind]), tools=tools)
    within = rb.count_tokens(
        convert_to_openai_messages([*full, *seeing["llm_input_messages"]]), tools=tools
    )
    assert over > CFG.budget >= within


@pytest.mark.parametrize("placement", ["leading_system", "user", "inline_system"])
def test_the_hook_places_notes_where_asked(placement: str) -> None:
    history: list[Any] = [HumanMessage("Email Ana, then read the logs.")]
    for i, call in enumerate(script(TURNS)[:-1]):
        history += [call, ToolMessage(read_log.invoke({"day": i}), tool_call_id=f"call_{i}")]
    cfg = dataclasses.replace(CFG, note_placement=placement)
    out = pre_model_hook(cfg, prompt=PROMPT, tools=TOOLS)({"messages": history})
    msgs = out["llm_input_messages"]
    at = {"leading_system": 0, "user": 1, "inline_system": 1}[placement]
    kind = HumanMessage if placement == "user" else SystemMessage
    assert isinstance(msgs[at], kind)
    assert msgs[at].content.startswith("[ringbound:side-effect-ledger]")
    assert all(
        m is history[0]
        for m in msgs
        if isinstance(m, HumanMessage) and m.id is None and m.content.startswith("Email")
    )


def test_the_hook_refuses_what_it_cannot_honour() -> None:
    with pytest.raises(rb.ConfigError) as e:
        pre_model_hook(dataclasses.replace(CFG, note_placement="top_level_system"))
    assert e.value.key == "note_placement"
    with pytest.raises(rb.ConfigError) as e:
        pre_model_hook(dataclasses.replace(CFG, on_still_over_budget="drop_tools_schema_then_fail"))
    assert e.value.key == "on_still_over_budget"
    with pytest.raises(rb.ConfigError) as e:
        pre_model_hook(CFG, prompt=42)  # type: ignore[arg-type]
    assert e.value.key == "prompt"
    with pytest.raises(rb.ConfigError) as e:
        RingboundMiddleware(CFG, ledger=[])  # type: ignore[arg-type]
    assert e.value.key == "ledger"
