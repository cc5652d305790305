"""Replaying a session turn by turn to show what cache-stable assembly buys: every turn's
request is assembled with the previous turn's state, statelessly, and by LangChain's
``trim_messages``, all at one budget; for each, the share of the request a provider's prompt
cache could serve (the prefix it shares with the previous request), how full it is, and what
it costs. ``ringbound simulate SESSION.json`` prints the comparison."""

from __future__ import annotations

import dataclasses
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import orjson

from ..adapted import read_canonical
from ..assembler import Assembler
from ..cache_lifetime import lifetime
from ..cache_markers import DEFAULT_MIN_TOKENS, unmarked
from ..config import AssemblyConfig
from ..counting import count_tokens, validate
from ..errors import ConfigError, RingboundError
from ..providers import adapter, check_provider
from ..summary import summarizers
from ..translation import translate
from .cache_rules import PromptCache, rules_for
from .fidelity import cli_main as fidelity_main
from .replay import STATEFUL, STATELESS, TIMED, TRIM, Simulation, Turn, Way
from .session import Session, load_session
from .simulate_plot import plot_simulation

__all__ = [
    "STATEFUL",
    "STATELESS",
    "TIMED",
    "TRIM",
    "Simulation",
    "Turn",
    "Way",
    "agent_session",
    "cli_main",
    "simulate",
    "think_times",
    "turn_ends",
]

#: LangChain's recommended settings for chat histories (as in benches/langchain_baseline.py):
#: keep the system message, start the kept history on a human message, end on a human or
#: tool message.
TRIM_SETTINGS: dict[str, Any] = {
    "strategy": "last",
    "include_system": True,
    "start_on": "human",
    "end_on": ("human", "tool"),
}

# Turns --------------------------------------------------------------------------------------


def turn_ends(
    messages: Sequence[Any], provider: str = "openai_chat", *, system: Any = None
) -> tuple[list[int], int]:
    """Where each replayed turn's history ends: after every complete tool ring (an assistant
    message with calls and all their results; plain messages go with the ring that follows
    them), and at the end of the session.

    Returns:
        ``(ends, unreplayed)``: the native lengths of the turns' histories, and how many
        trailing messages were left out because they hold a call without its results.

    Example:
        >>> call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        >>> turn_ends([{"role": "user", "content": "go"},
        ...            {"role": "assistant", "content": None, "tool_calls": [call]},
        ...            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ...            {"role": "assistant", "content": "done"}])
        ([3, 4], 0)
    """
    check_provider(provider)
    if provider == "openai_chat":
        canon = [_mapping(m) for m in messages]
        spans = [(i, i + 1) for i in range(len(canon))]
    else:
        c = read_canonical(adapter(provider), list(messages), system)
        canon, spans = c.messages, c.spans
    ends: list[int] = []
    open_call = False
    i = 0
    while i < len(canon):
        calls = canon[i].get("role") == "assistant" and canon[i].get("tool_calls")
        if not calls:
            i += 1
            continue
        ids = {c.get("id") for c in calls if isinstance(c, dict)}
        j = i + 1
        answered = set()
        while j < len(canon) and canon[j].get("role") == "tool":
            answered.add(canon[j].get("tool_call_id"))
            j += 1
        open_call = not ids <= answered
        if not open_call:
            end = spans[j - 1][1]
            # A boundary only where a native message ends (several canonical messages may
            # stand for one native one).
            if j == len(canon) or spans[j][0] >= end:
                ends.append(end)
        i = j
    unreplayed = 0
    if not ends or ends[-1] < len(messages):
        if open_call:
            unreplayed = len(messages) - (ends[-1] if ends else 0)
        else:
            ends.append(len(messages))
    return ends, unreplayed


def _mapping(m: Any) -> dict[str, Any]:
    if isinstance(m, dict):
        return m
    dump = getattr(m, "model_dump", None)
    return dump() if callable(dump) else dict(m)


# Measuring requests -------------------------------------------------------------------------


class _Meter:
    """Counts a request and the tokens it shares with the previous one."""

    def __init__(
        self,
        provider: str,
        budget: int,
        encoding: str,
        cache: str | None = None,
        lifetime: float | None = None,
        min_tokens: int = DEFAULT_MIN_TOKENS,
        mode: str | None = None,
    ) -> None:
        self.provider = provider
        self.budget = budget
        self.encoding = encoding
        self.previous: list[bytes] | None = None
        self.lifetime, self.at = lifetime, None
        self.cache = (
            None
            if cache is None
            else PromptCache(
                cache, provider, self.count, lifetime=lifetime, min_tokens=min_tokens, mode=mode
            )
        )

    def count(self, messages: list[Any], tools: Any, system: Any) -> int:
        return count_tokens(messages, self.provider, self.encoding, tools or None, system=system)

    def measure(
        self, messages: list[Any], tools: Any, system: Any, at: float | None = None
    ) -> dict[str, Any]:
        """The fields of a ``Turn`` that describe its request (sent at ``at``)."""
        # The order a provider reads a request in: tools, system, then the messages; cache
        # markers are no content (they move to the newest message each turn).
        items = [_dump(unmarked(tools)), _dump(unmarked(system))]
        items += [_dump(m) for m in unmarked([_mapping(m) for m in messages])]
        tokens = self.count(messages, tools, system)
        prev = self.previous
        self.previous = items
        run = 0
        if prev is not None:
            while run < min(len(prev), len(items)) and prev[run] == items[run]:
                run += 1
        shared = max(0, run - 2)
        if shared == 0 and not (run >= 1 and tools) and not (run >= 2 and system):
            cached = 0
        else:
            cached = min(
                tokens,
                self.count(
                    messages[:shared],
                    tools if run >= 1 else None,
                    system if run >= 2 else None,
                ),
            )
        written = 0
        last, self.at = self.at, at
        if self.cache is not None:
            cached, written = self.cache.serve(messages, tools, system, cached, at or 0.0)
        elif self.lifetime is not None and None not in (last, at) and at - last >= self.lifetime:
            cached = 0  # the cache expired since the previous request
        return {
            "tokens": tokens,
            "written_tokens": written,
            "messages": len(messages),
            "conversation": sum(
                _mapping(m).get("role") not in ("system", "developer") for m in messages
            ),
            "cached_tokens": cached,
            "kept_previous": prev is not None and run == len(prev),
            "within_budget": tokens <= self.budget,
            "valid": not validate(messages, self.provider, system=system),
            "at": at,
        }


def _dump(obj: Any) -> bytes:
    return orjson.dumps(obj, default=_mapping)


# The ways ------------------------------------------------------------------------------------


def _ringbound_way(
    name: str,
    asm: Assembler,
    ends: list[int],
    session: Session,
    provider: str,
    cache: str | None = None,
    times: list[float] | None = None,
) -> Way:
    meter = _meter(provider, asm.config, cache, times)
    stateful = asm.config.cache_stable
    state = None
    turns: list[Turn] = []
    for n, end in enumerate(ends, 1):
        history = session.messages[:end]
        at = times[n - 1] if times else None
        try:
            res = asm.assemble(history, session.tools, system=session.system, state=state, now=at)
        except RingboundError as e:
            return Way(name, tuple(turns), error=f"turn {n}: {type(e).__name__}: {e}")
        measured = meter.measure(res.messages, res.tools, res.system, at)
        r = res.report
        if stateful:
            before = state.compactions if state is not None else 0
            compacted = res.state is not None and res.state.compactions > before
            state = res.state
        else:
            compacted = n > 1 and not measured["kept_previous"]
        turns.append(
            Turn(
                turn=n,
                history=end,
                compacted=compacted,
                state=r.state,
                summarizer_calls=r.summary.calls if r.summary is not None else 0,
                **measured,
            )
        )
    return Way(name, tuple(turns))


def _meter(
    provider: str, config: AssemblyConfig, cache: str | None, times: list[float] | None
) -> _Meter:
    """A meter with the provider's cache lifetime when the turns are timed."""
    least = config.min_cache_tokens
    return _Meter(
        provider,
        config.budget,
        config.encoding,
        cache,
        lifetime(provider, config) if times else None,
        DEFAULT_MIN_TOKENS if least is None else least,
        config.prompt_cache_mode,
    )


def think_times(turns: int, mean: float, seed: int = 0) -> list[float]:
    """When each turn's request is sent, in seconds from the first: the pauses between turns
    drawn from an exponential distribution of mean ``mean`` (a model call and its tools, or
    a person reading), seeded, so a replay is the same every time.

    Example:
        >>> think_times(3, 60.0, seed=1) == think_times(3, 60.0, seed=1)
        True
    """
    rng = random.Random(seed)
    at, out = 0.0, []
    for n in range(turns):
        at += rng.expovariate(1 / mean) if n else 0.0
        out.append(round(at, 3))
    return out


def _trim_way(
    ends: list[int],
    session: Session,
    provider: str,
    budget: int,
    encoding: str,
    cache: str | None = None,
    config: AssemblyConfig | None = None,
    times: list[float] | None = None,
) -> tuple[Way, str]:
    """LangChain's ``trim_messages`` at the same budget, its counter in ringbound's accounting
    (OpenAI framing, the config's encoding), so a budget means the same tokens on both
    sides."""
    try:
        from langchain_core.messages import (
            convert_to_messages,
            convert_to_openai_messages,
            trim_messages,
        )
    except ImportError:
        return Way(TRIM, skipped="langchain-core is not installed"), ""
    if provider != "openai_chat":
        return Way(TRIM, skipped=f"it takes OpenAI Chat messages, the session is {provider}"), ""
    try:
        lc = convert_to_messages(session.messages)
    except (ValueError, TypeError, KeyError) as e:
        return Way(TRIM, skipped=f"LangChain cannot read the session ({e})"), ""
    as_openai: dict[int, tuple[Any, dict[str, Any]]] = {}
    sizes: dict[int, tuple[Any, int]] = {}
    framing = count_tokens([], encoding=encoding)

    def openai_of(m: Any) -> dict[str, Any]:
        hit = as_openai.get(id(m))
        if hit is None or hit[0] is not m:
            hit = as_openai[id(m)] = (m, convert_to_openai_messages(m))
        return hit[1]

    def size(m: Any) -> int:
        hit = sizes.get(id(m))
        if hit is None or hit[0] is not m:
            hit = sizes[id(m)] = (m, count_tokens([openai_of(m)], encoding=encoding) - framing)
        return hit[1]

    def counter(messages: Sequence[Any]) -> int:
        return framing + sum(size(m) for m in messages)

    tools_tokens = count_tokens([], encoding=encoding, tools=session.tools or None) - framing
    limit = budget - tools_tokens
    meter = _meter(provider, config or AssemblyConfig(), cache, times)
    turns: list[Turn] = []
    for n, end in enumerate(ends, 1):
        try:
            kept = trim_messages(lc[:end], max_tokens=limit, token_counter=counter, **TRIM_SETTINGS)
        except ValueError as e:
            return Way(TRIM, tuple(turns), error=f"turn {n}: {type(e).__name__}: {e}"), ""
        request = [openai_of(m) for m in kept]
        measured = meter.measure(request, session.tools, None, times[n - 1] if times else None)
        turns.append(
            Turn(turn=n, history=end, compacted=n > 1 and not measured["kept_previous"], **measured)
        )
    label = f"{encoding} (ringbound's exact BPE), OpenAI framing, tools schema subtracted"
    return Way(TRIM, tuple(turns)), label


def simulate(
    session: Session,
    config: AssemblyConfig,
    *,
    provider: str = "openai_chat",
    summarizer: Callable[..., Any] | None = None,
    price_factor: float = 0.1,
    name: str = "session",
    langchain: bool = True,
    cache: str | None = None,
    think_time: float | None = None,
    seed: int = 0,
) -> Simulation:
    """Replays ``session`` one ring per turn and assembles each turn three ways at
    ``config.budget``: ringbound with the previous turn's state (``cache_stable``), ringbound
    without state, and LangChain's ``trim_messages`` (when langchain-core is installed and
    the session is OpenAI Chat).

    Args:
        session: The session (``load_session``'s result, or ``Session(messages, tools,
            bare=True)``).
        config: The policy; ``cache_stable`` is set per way.
        provider: The session's wire format.
        summarizer: Given to both ringbound ways (e.g. ``summarizers.extractive()``).
        price_factor: Price of a cached input token relative to an uncached one.
        name: What the tables call the session.
        langchain: False to leave ``trim_messages`` out.
        cache: Replay under a provider's caching rules (``ringbound.cli.cache_rules``:
            ``anthropic``, ``bedrock_converse``, ``openai``); None: the prefix shared with the
            previous request is the cached part.
        think_time: Mean seconds between turns (``think_times``): each request is sent at
            its time (``assemble(..., now=...)``) and the provider's cache expires after its
            lifetime (``ringbound.cache_lifetime``); a fourth way, ``ringbound timed``,
            compacts when the cache has expired (``compact_on_cache_expiry``). None: the
            turns follow each other within the lifetime.
        seed: The seed of the think times.

    Example:
        >>> import ringbound as rb
        >>> from ringbound.cli.session import Session
        >>> from ringbound.cli.simulate import agent_session, simulate, STATEFUL
        >>> s = Session(agent_session(turns=40), tools=None, bare=True)
        >>> cfg = rb.AssemblyConfig(model_input_limit=6000, output_reserve_tokens=0,
        ...                         safety_margin_tokens=0)
        >>> sim = simulate(s, cfg, langchain=False)
        >>> sim.way(STATEFUL).compactions > 0 and sim.way(STATEFUL).broken == 0
        True
    """
    if isinstance(price_factor, bool) or not isinstance(price_factor, (int, float)):
        raise ConfigError("price_factor must be a number", key="price_factor")
    if not 0 <= price_factor <= 1:
        raise ConfigError(
            f"price_factor must be in [0, 1], got {price_factor}",
            key="price_factor",
            reason="must be in [0, 1]",
        )
    if cache is not None and cache not in (
        rules_for(provider),
        rules_for(provider, config),
        "openai",
    ):
        raise ConfigError(
            f"cache rules {cache!r} do not apply to a {provider} session",
            key="cache",
            reason=f"must be {rules_for(provider) or 'openai'} for {provider}",
        )
    if think_time is not None and (
        isinstance(think_time, bool)
        or not isinstance(think_time, (int, float))
        or not 0 < think_time <= 86_400
    ):
        raise ConfigError(
            f"think_time must be a number of seconds in (0, 86400], got {think_time!r}",
            key="think_time",
            reason="must be in (0, 86400]",
        )
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed must be an integer, got {seed!r}", key="seed")
    ends, unreplayed = turn_ends(session.messages, provider, system=session.system)
    times = think_times(len(ends), float(think_time), seed) if think_time else None
    history = session.messages[: ends[-1]] if ends else []
    total = count_tokens(
        history, provider, config.encoding, session.tools or None, system=session.system
    )
    ways = []
    kinds = [(STATEFUL, True, False), (STATELESS, False, False)]
    if times:
        kinds.insert(1, (TIMED, True, True))
    for way, stateful, timed in kinds:
        cfg = dataclasses.replace(config, cache_stable=stateful, compact_on_cache_expiry=timed)
        asm = Assembler(cfg, provider=provider, summarizer=summarizer)
        ways.append(_ringbound_way(way, asm, ends, session, provider, cache, times))
    counter = ""
    if langchain:
        trim, counter = _trim_way(
            ends, session, provider, config.budget, config.encoding, cache, config, times
        )
        ways.append(trim)
    else:
        ways.append(Way(TRIM, skipped="left out"))
    return Simulation(
        name=name,
        provider=provider,
        budget=config.budget,
        price_factor=float(price_factor),
        session_tokens=total,
        unreplayed=unreplayed,
        ways=tuple(ways),
        trim_counter=counter,
        cache=cache,
        write_factor=PromptCache(cache, provider, count_tokens).write_factor if cache else 1.0,
        think_time=None if think_time is None else float(think_time),
        seed=seed,
        lifetime=lifetime(provider, config) if times else None,
    )


def _as_provider(session: Session, provider: str) -> tuple[Session, int]:
    """The session in ``provider``'s format: as it is when it is in it, converted from OpenAI
    Chat (messages, system and function tools) otherwise; and how many trailing messages of
    the file were left out of the conversion because they hold a call without its results
    (the replay would leave them out anyway, and the writer takes pairing-valid sessions)."""
    detected = session.detected_provider()
    if detected == provider:
        return session, 0
    if detected != "openai_chat" or provider not in _CONVERTS_TO:
        raise ConfigError(
            f"the session is {detected}; simulate --provider {provider} converts only OpenAI "
            f"Chat sessions to anthropic, bedrock_converse or openai_responses",
            key="provider",
            reason="cannot convert the session",
        )
    chat = list(session.messages)
    _, cut = turn_ends(chat)
    # The core's writer: Anthropic's ledger and summary notes become system blocks, a late
    # system message user text, call ids the target's own, the function tools in the
    # target's shape (``rb.translate``).
    native = translate(
        chat[: len(chat) - cut],
        source="openai_chat",
        target=provider,
        tools=[_mapping(t) for t in session.tools] if session.tools else None,
    )
    return Session(native.messages, native.tools, bare=False, system=native.system), cut


#: The providers an OpenAI Chat session is converted to.
_CONVERTS_TO = ("anthropic", "bedrock_converse", "openai_responses")


# A generated session --------------------------------------------------------------------------

_WORDS = (
    "the request budget cache parser report handler client record buffer index ring message "
    "stage ledger schema payload batch worker queue token session config retry window prefix "
    "summary result call tool agent plan cut unit reply price model provider error value test "
    "file line module function class field update delete create read write check merge apply "
    "render split fetch store drop keep and of to in for with on by from is was will should"
).split()
_READS = ("read_file", "grep", "list_dir", "run_tests", "http_get")
#: The generated session's side-effecting tools (for ``side_effect_tools``).
SIDE_EFFECT_TOOLS = ("write_file", "deploy")


def agent_session(turns: int = 300, seed: int = 6) -> list[dict[str, Any]]:
    """A deterministic OpenAI Chat agent session of ``turns`` tool rings: one to four
    parallel calls per ring, results from a line to a few thousand tokens, now and then a
    side effect (``SIDE_EFFECT_TOOLS``) and a user message between rings.

    Example:
        >>> s = agent_session(turns=3)
        >>> sum(1 for m in s if m.get("tool_calls"))
        3
    """
    rng = random.Random(seed)

    def text(words: int) -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(words))

    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. " + text(400)},
        {"role": "user", "content": "Fix the failing tests. " + text(60)},
    ]
    calls = 0
    for _ in range(turns):
        if rng.random() < 0.08:
            messages += [
                {"role": "assistant", "content": text(rng.randint(20, 80))},
                {"role": "user", "content": "Continue. " + text(rng.randint(5, 30))},
            ]
        ring_calls = []
        for _ in range(rng.choices((1, 2, 3, 4), weights=(6, 3, 2, 1))[0]):
            calls += 1
            tool = rng.choice(SIDE_EFFECT_TOOLS) if rng.random() < 0.06 else rng.choice(_READS)
            args = {"path": f"src/{rng.choice(_WORDS)}_{rng.randint(1, 99)}.py"}
            ring_calls.append(
                {
                    "id": f"call_{calls:05d}",
                    "type": "function",
                    "function": {"name": tool, "arguments": orjson.dumps(args).decode()},
                }
            )
        content = text(rng.randint(5, 40)) if rng.random() < 0.4 else None
        messages.append({"role": "assistant", "content": content, "tool_calls": ring_calls})
        for call in ring_calls:
            size = rng.choices((8, 120, 600, 2500), weights=(3, 5, 3, 1))[0]
            result = text(rng.randint(size // 2, size))
            if rng.random() < 0.05:
                result = "Error: " + text(12)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return messages


# The command ---------------------------------------------------------------------------------


def cli_main(
    path: str | Path,
    *,
    budget: int | None = None,
    limit: int | None = None,
    config: str | Path | None = None,
    provider: str | None = None,
    price_factor: float = 0.1,
    summarize: bool = False,
    per_turn: bool = False,
    json_out: bool = False,
    out: TextIO | None = None,
    think_time: float | None = None,
    seed: int = 0,
    plot: str | Path | None = None,
    fidelity: bool = False,
) -> int:
    """``ringbound simulate SESSION.json``: prints the comparison table (and the per-turn
    rows, or everything as JSON). Returns 0; 1 when the stateful way made a bad request
    (over budget, broken pairing, a ``reused`` turn that changed the prefix); 2 when it
    stopped on an error (the protected part alone over the budget, say).

    Args:
        path: The session file.
        budget: The whole budget (no reserve, no margin); default half the session's tokens.
        limit: ``model_input_limit`` instead (the config's reserve and margin apply).
        config: A YAML file with a ``context_assembly:`` block.
        provider: Replay under this provider's caching rules (``ringbound.cli.cache_rules``),
            in its format: an OpenAI Chat session is converted to it. None: the format
            detected from the body, and the prefix shared with the previous request counted
            as cached.
        price_factor: Price of a cached input token relative to an uncached one.
        summarize: Summarize dropped units with the extractive summarizer.
        per_turn: Also print one row per turn.
        json_out: Print JSON instead of tables.
        out: Where to print (stdout).
        think_time: Mean seconds between turns: the provider's cache lifetime applies, and
            a ``ringbound timed`` way compacts once it has passed (see ``simulate``).
        seed: The seed of the think times.
        plot: Also draw the replay per turn into this ``.png`` or ``.svg``
            (``ringbound.cli.simulate_plot``; needs matplotlib).
        fidelity: Report instead how many of the facts each tool call uses the assembled
            history before it still holds (``ringbound.cli.fidelity``); returns 0.

    Raises:
        RingboundError: The session or the options cannot be read.
    """
    out = out or sys.stdout
    if plot is not None and Path(plot).suffix.lower() not in (".png", ".svg"):
        # Said before the replay runs, not after.
        raise ConfigError(
            f"--plot writes .png or .svg, not {Path(plot).name!r}",
            key="plot",
            reason="must end in .png or .svg",
        )
    if budget is not None and limit is not None:
        raise ConfigError("give --budget or --limit, not both", key="budget")
    session = load_session(path)
    cache = None
    cut = 0
    if provider:
        provider = check_provider(provider)
        cache = rules_for(provider)
        session, cut = _as_provider(session, provider)
    else:
        provider = session.detected_provider()
    cfg = AssemblyConfig.from_yaml(config) if config else AssemblyConfig()
    if cache is not None:
        cache = rules_for(provider, cfg)  # GPT-5.6's breakpoints with prompt_cache_mode
    if fidelity:
        return fidelity_main(
            session,
            cfg,
            provider,
            budget=budget,
            limit=limit,
            name=Path(path).name,
            json_out=json_out,
            out=out,
        )
    values = cfg.to_dict()
    if limit is not None:
        values["model_input_limit"] = limit
    else:
        if budget is None:
            ends, _ = turn_ends(session.messages, provider, system=session.system)
            whole = count_tokens(
                session.messages[: ends[-1]] if ends else [],
                provider,
                cfg.encoding,
                session.tools or None,
                system=session.system,
            )
            budget = max(1, whole // 2)
        values.update(model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0)
    cfg = AssemblyConfig.from_dict(values)
    sim = simulate(
        session,
        cfg,
        provider=provider,
        summarizer=summarizers.extractive() if summarize else None,
        price_factor=price_factor,
        name=Path(path).name,
        cache=cache,
        think_time=think_time,
        seed=seed,
    )
    if cut:
        sim = dataclasses.replace(sim, unreplayed=sim.unreplayed + cut)
    if json_out:
        body = sim.to_dict(per_turn=per_turn)
        out.write(orjson.dumps(body, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        if per_turn:
            out.write(sim.per_turn_table() + "\n\n")
        out.write(sim.table() + "\n")
    if plot is not None:
        plot_simulation(sim, plot, cfg.compact_trigger_ratio)
        print(f"plot written to {plot}", file=sys.stderr)
    w = sim.way(STATEFUL)
    if w.error:
        return 2
    return 1 if w.broken or w.reuse_breaks else 0
