"""The ringbound command: assemble, validate, count and benchmark session files, and the
demo. Reads a file or standard input (-); writes the assembled body to standard output (or
-o FILE) and the report to standard error (or alone on standard output with --json)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import orjson

from .. import models
from .._core import __version__
from ..assembler import Assembler
from ..body import no_budget, output_reserve
from ..config import INT_MAX, AssemblyConfig
from ..counting import count_tokens, validate
from ..errors import ConfigError, RingboundError
from ..providers import PROVIDERS, adapter
from ..report import AssemblyReport
from ..summary import summarizers
from .bench import bench_sessions, format_table
from .demo import run_demo
from .session import MAX_BYTES, Session, load_session

__all__ = ["main"]


def _config(args: argparse.Namespace, session: Session | None = None) -> AssemblyConfig:
    """The config the flags describe: --config's file or the defaults, sized by --model (or
    the body's own ``model`` when the models table knows it), then the size flags. A body's
    own output reserve (``max_tokens`` and each provider's spelling) wins over ``--reserve``,
    as in ``assemble_body``: the provider reserves what the body asks for."""
    model = _model(args, session)
    asked = output_reserve(session.body) if session is not None else None
    if model is not None:
        cfg = AssemblyConfig.for_model(model)
        if args.config:
            cfg = AssemblyConfig.from_dict(
                {**AssemblyConfig.from_yaml(args.config).to_dict(), **_sized(cfg)}
            )
    else:
        cfg = AssemblyConfig.from_yaml(args.config) if args.config else AssemblyConfig()
    values = cfg.to_dict()
    if model is not None and asked is not None:
        # The entry's limit for the body's reserve, as Assembler.for_models sizes the body.
        values["model_input_limit"] = models.lookup(model).input_limit(asked[1])
    reserve = getattr(args, "reserve", None)
    margin = getattr(args, "margin", None)
    if args.limit is not None:
        values["model_input_limit"] = args.limit
        if not args.config:
            # The defaults (8192 + 1024) are sized for large windows; a small --limit without
            # --reserve or --margin keeps a quarter and a thirty-second of it for them.
            values["output_reserve_tokens"] = min(values["output_reserve_tokens"], args.limit // 4)
            values["safety_margin_tokens"] = min(values["safety_margin_tokens"], args.limit // 32)
    if reserve is not None:
        values["output_reserve_tokens"] = reserve
    if margin is not None:
        values["safety_margin_tokens"] = margin
    if args.budget is not None:
        values.update(
            model_input_limit=args.budget, output_reserve_tokens=0, safety_margin_tokens=0
        )
    if asked is not None:
        _body_reserve(values, asked, reserve, args.budget)
    if args.repair:
        values["on_pairing_error"] = "synthesize_error_results"
    tools = getattr(args, "side_effect_tools", None)
    if tools:
        values["side_effect_tools"] = [t.strip() for part in tools for t in part.split(",") if t]
    return AssemblyConfig.from_dict(values)


def _model(args: argparse.Namespace, session: Session | None) -> str | None:
    """The model that sizes the request: ``--model``, else the body's own ``model`` when the
    models table knows it (and no ``--config`` sizes it instead)."""
    model = getattr(args, "model", None)
    if model is None and session is not None and not getattr(args, "config", None):
        body_model = session.body.get("model")
        if isinstance(body_model, str) and _known(args, body_model):
            model = body_model
    return model


def _known(args: argparse.Namespace, body_model: str) -> bool:
    """Whether the models table knows the body's model. Unknown, and with no --limit or
    --budget to size the request instead, it is said on standard error (the default window
    would be used), or refused with --strict-model."""
    if getattr(args, "limit", None) is not None or getattr(args, "budget", None) is not None:
        return models.find(body_model) is not None
    strict = True if getattr(args, "strict_model", False) else None
    return models.resolve(body_model, where="the body's model", strict=strict) is not None


def _body_reserve(
    values: dict[str, Any], asked: tuple[str, int], flag: int | None, budget: int | None
) -> None:
    """Makes the body's own output reserve the config's, as ``assemble_body`` will apply it:
    ``--budget`` stays the history's whole budget (the limit grows by the reserve), and a
    ``--reserve`` it overrides is named on standard error."""
    field, count = asked
    if flag is not None and flag != count:
        print(
            f"note: the body's {field} {count} is the output reserve; --reserve {flag} applies "
            "only to bodies that name none",
            file=sys.stderr,
        )
    if budget is not None:
        if budget + count > INT_MAX:
            # Named as typed: the limit it would make is a number the user never gave.
            reason = (
                f"--budget {budget} plus the body's {field} {count} is over 2**40, the "
                "largest model_input_limit"
            )
            raise ConfigError(reason, key="model_input_limit", reason=reason)
        values["model_input_limit"] = budget + count
    values["output_reserve_tokens"] = count
    limit, margin = values["model_input_limit"], values["safety_margin_tokens"]
    margin = 0 if margin == "auto" else margin
    if isinstance(limit, int) and isinstance(margin, int) and limit - count - margin <= 0:
        raise no_budget(field, count, limit, margin)


def _sized(cfg: AssemblyConfig) -> dict[str, object]:
    """What a model's entry sets in a config."""
    keys = ("model_input_limit", "output_reserve_tokens", "encoding", "token_ratio")
    return {k: getattr(cfg, k) for k in keys}


def _load(args: argparse.Namespace) -> Session:
    """The session, read no further than ``max_request_bytes`` (``--config``'s, else the
    default) as ``assemble_body`` would take it."""
    config = getattr(args, "config", None)
    limit = AssemblyConfig.from_yaml(config).max_request_bytes if config else MAX_BYTES
    return load_session(args.session, index=args.session_index, key=args.key, limit=limit)


def _assemble(args: argparse.Namespace) -> int:
    """A request body goes through ``assemble_body``, as a gateway runs it (kept messages as
    the input's own bytes, every other field as it was); a bare list through ``assemble``."""
    session = _load(args)
    provider = _provider(args, session)
    summarizer = summarizers.extractive() if args.summarize else None
    cfg = _config(args, session)
    asm = Assembler(cfg, provider=provider, summarizer=summarizer)
    if session.bare:
        res = asm.assemble(session.messages, session.tools, system=session.system)
        body, report = orjson.dumps(res.messages, option=orjson.OPT_INDENT_2), res.report
    else:
        got = asm.assemble_body(session.request_body())
        body, report = got.body, got.report
    out = args.output if args.output is not None else (None if args.json else "-")
    if out == "-":
        sys.stdout.buffer.write(body + b"\n")
        sys.stdout.flush()
    elif out is not None:
        with open(out, "wb") as f:
            f.write(body + b"\n")
    before = _exact_before(report, session, provider, cfg)
    if args.json:
        doc = {**report.to_dict(), "tokens_before_counted": before}
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")
    else:
        _print_report(report, before, provider, cfg, sys.stderr)
    return 0


def _exact_before(r: AssemblyReport, session: Session, provider: str, cfg: AssemblyConfig) -> int:
    """The input's exact token count. The report's ``tokens_before`` is one when
    ``tokens_before_exact`` says so; otherwise (units the plan certainly dropped were sized
    from their bytes at a sampled rate) the input is counted again as the assembly counts
    it: the command line is not a hot path, and an estimate is not a figure to print."""
    if r.tokens_before_exact:
        return r.tokens_before
    return _counted(session, provider, cfg)


def _counted(session: Session, provider: str, cfg: AssemblyConfig) -> int:
    """Tokens of the session as an assembly with ``cfg`` counts them: its encoding, backend
    and token ratio (a learned ``auto`` ratio starts from the provider's default, as a new
    Assembler's does)."""
    return count_tokens(
        session.messages,
        provider,
        cfg.encoding,
        session.tools,
        tokenizer_backend=cfg.tokenizer_backend,
        system=session.system,
        token_ratio=_ratio(provider, cfg),
    )


def _ratio(provider: str, cfg: AssemblyConfig) -> float:
    """The token ratio an Assembler of ``cfg`` scales counts by: the config's, else the
    provider's default (OpenAI's is 1.0)."""
    if isinstance(cfg.token_ratio, (int, float)):
        return float(cfg.token_ratio)
    return 1.0 if provider == "openai_chat" else float(adapter(provider).default_token_ratio)


def _print_report(
    r: AssemblyReport, before: int, provider: str, cfg: AssemblyConfig, to: TextIO
) -> None:
    """The report for a person: exact figures only. A stage's own saving is printed when the
    report's figures are exact; when they are estimates (``tokens_before_exact`` False)
    only the total, counted exactly, is, and each stage's units."""
    print(f"provider {provider}", file=to)
    print(
        f"budget   {cfg.budget} = limit {cfg.model_input_limit} - reserve "
        f"{cfg.output_reserve_tokens} - margin {cfg.safety_margin_tokens}",
        file=to,
    )
    print(
        f"tokens   {before} -> {r.tokens_after} ({_saved(before - r.tokens_after)}, "
        f"budget {r.budget})",
        file=to,
    )
    print(f"messages {r.messages_before} -> {r.messages_after}", file=to)
    for s in r.stages:
        line = f"stage    {s.stage}: {s.units} unit(s)"
        if s.stage == "summarize":
            # The note costs tokens (its saving is negative): what it stands for was
            # dropped by the drop stages.
            line += f", {_saved(s.tokens_saved, ' tokens')} (the summary note)"
        elif r.tokens_before_exact:
            line += f", {_saved(s.tokens_saved, ' tokens')}"
        print(line, file=to)
    if r.repairs:
        calls = ", ".join(r.repairs)
        print(f"repaired {len(r.repairs)} call(s) without result: {calls}", file=to)
    for w in r.rewrites:
        print(f"rewrote  message {w.index} ({w.kind}), {w.tokens_saved} tokens saved", file=to)
    if r.summary is not None:
        s = r.summary
        state = "failed: " + str(s.reason) if s.failed else (s.reason or "written")
        print(f"summary  {s.units} unit(s) -> {s.tokens} tokens ({state})", file=to)
    if r.ledger_entries:
        print(f"ledger   {r.ledger_entries} side-effecting call(s) recorded", file=to)
    print("buckets  " + ", ".join(f"{k} {v}" for k, v in r.bucket_tokens.items()), file=to)
    print(f"time     {r.elapsed_s * 1000:.2f} ms", file=to)


def _saved(tokens: int, noun: str = "") -> str:
    """A change in tokens in words: a request that grew (a summary note larger than what it
    replaced) is said to have grown, never to have saved a negative number."""
    return f"{abs(tokens)}{noun} {'saved' if tokens >= 0 else 'added'}"


def _provider(args: argparse.Namespace, session: Session) -> str:
    """The provider asked for, else the one the body's format shows."""
    return args.provider or session.detected_provider()


def _validate(args: argparse.Namespace) -> int:
    session = _load(args)
    provider = _provider(args, session)
    model = _model(args, session)
    if model is not None:
        models.lookup(model)  # an unknown --model is a ConfigError, as in assemble
    issues = validate(session.messages, provider=provider, system=session.system)
    if args.json:
        doc = {
            "valid": not issues,
            "provider": provider,
            "model": model,
            "issues": [
                {"index": i.index, "kind": i.kind, "call_id": i.call_id, "message": i.message}
                for i in issues
            ],
        }
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 1 if issues else 0
    for i in issues:
        print(f"messages[{i.index}] {i.kind}: {i.message}")
    if not issues:
        print("pairing valid")
    return 1 if issues else 0


def _count(args: argparse.Namespace) -> int:
    """The session's tokens as ``assemble`` counts them for the same flags: the bare number
    on standard output (for scripts), what it was counted with on standard error; or both as
    one JSON object with ``--json``."""
    session = _load(args)
    provider = _provider(args, session)
    model = _model(args, session)
    cfg = AssemblyConfig.for_model(model) if model is not None else AssemblyConfig()
    if args.encoding is not None:
        cfg = AssemblyConfig.from_dict({**cfg.to_dict(), "encoding": args.encoding})
    tokens = _counted(session, provider, cfg)
    ratio = _ratio(provider, cfg)
    if args.json:
        doc = {
            "tokens": tokens,
            "provider": provider,
            "encoding": cfg.encoding,
            "token_ratio": ratio,
            "model": model,
        }
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    print(tokens)
    sized = "" if model is None else f", model {model}"
    print(f"tokens of {provider} with {cfg.encoding}, token ratio {ratio}{sized}", file=sys.stderr)
    return 0


def _bench(args: argparse.Namespace) -> int:
    asm = Assembler(_config(args), provider=args.provider)
    results, failures = bench_sessions(asm, args.sessions, args.repeat, args.progress)
    if args.json:
        body = [r.to_dict() for r in results]
        sys.stdout.write(orjson.dumps(body, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif results:
        print(format_table(results))
    for failure in failures:
        print(f"error: {failure}", file=sys.stderr)
    return 2 if failures else 0


#: The most a count flag (``bench --repeat``, ``inspect --width``) takes: far beyond any
#: useful run or screen, and a typo of a huge number stops at once instead of running for
#: ever.
MAX_COUNT = 1_000_000


def _bounded(low: int, high: int, what: str) -> Callable[[str], int]:
    """An argparse type for a whole number in [low, high]; its error names the value as
    typed (argparse adds the flag), never a figure derived from it."""

    def parse(text: str) -> int:
        value = int(text)  # argparse words a ValueError as "invalid int value: 'text'"
        if not low <= value <= high:
            shown = "2**40" if high == INT_MAX else str(high)
            raise argparse.ArgumentTypeError(
                f"must be at least {low} and at most {shown}{what}, got {text}"
            )
        return value

    parse.__name__ = "int"
    return parse


_positive = _bounded(1, MAX_COUNT, "")
#: A budget or a limit in tokens; a reserve or a margin, which may be 0.
_tokens = _bounded(1, INT_MAX, " tokens")
_spare = _bounded(0, INT_MAX, " tokens")


def _demo(args: argparse.Namespace) -> int:
    return 1 if run_demo(sys.stdout) else 0


def _inspect(args: argparse.Namespace) -> int:
    from .inspect import run

    session = _load(args)
    return run(
        session,
        _config(args, session),
        _provider(args, session),
        name="standard input" if args.session == "-" else os.path.basename(args.session),
        summarize=args.summarize,
        json_out=args.json,
        html=args.html,
        width=args.width,
    )


def _simulate(args: argparse.Namespace) -> int:
    from .simulate import cli_main

    return cli_main(
        args.session,
        budget=args.budget,
        limit=args.limit,
        config=args.config,
        provider=args.provider,
        price_factor=args.price_factor,
        summarize=args.summarize,
        per_turn=args.per_turn,
        json_out=args.json,
        fidelity=args.fidelity,
        plot=args.plot,
        think_time=args.think_time,
        seed=args.seed,
    )


def _calibrate(args: argparse.Namespace) -> int:
    from .calibrate import cli_main

    return cli_main(args.usage, args.coverage, args.plot)


def _session_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "session",
        help="JSON file: a list of messages, a request body, or a list of sessions; - reads "
        "standard input",
    )
    p.add_argument(
        "--session",
        dest="session_index",
        type=int,
        metavar="N",
        help="for a file holding a list of sessions: which one (from 0)",
    )
    p.add_argument(
        "--key",
        help="for a list of sessions: the key holding each one's messages (e.g. traj); "
        "found by itself when there is one list",
    )
    p.add_argument("--provider", choices=PROVIDERS, help="wire format; default: detected")


def _size_args(p: argparse.ArgumentParser, *, budget_help: str) -> None:
    p.add_argument("--config", help="YAML file with a context_assembly: block")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--budget", type=_tokens, help=budget_help)
    size.add_argument(
        "--limit",
        type=_tokens,
        help="the model's input limit (model_input_limit); the reserve and margin are taken "
        "from it",
    )
    p.add_argument("--repair", action="store_true", help="synthesize results for unanswered calls")
    p.add_argument(
        "--strict-model",
        action="store_true",
        help="refuse a body whose model the models table does not know (instead of warning "
        "and using the default window)",
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ringbound",
        description="Assemble the next LLM request from a long agent session: within the "
        "budget, every tool call kept with its result.",
        epilog="Run 'ringbound COMMAND --help' for a command's options.",
    )
    p.add_argument("--version", action="version", version=f"ringbound {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    a = sub.add_parser(
        "assemble",
        help="assemble a session into a request body that fits",
        description="Assemble a session into a request body that fits its budget. A request "
        "body goes through assemble_body, as a gateway runs it: the same bytes out, every "
        "field kept but the history, system and tools. The body goes to standard output (or "
        "-o FILE); the report goes to standard error, or alone to standard output with "
        "--json. The budget is model_input_limit - output_reserve_tokens - "
        "safety_margin_tokens: from --model (or the body's model, when the models table "
        "knows it), --config, or the defaults, then the flags below; the body's own "
        "max_tokens (or its provider's spelling) is the output reserve when it names one.",
    )
    _session_args(a)
    _size_args(a, budget_help="the whole budget in tokens (no reserve, no margin)")
    a.add_argument("--model", help="size the request for this model (see docs/models.md)")
    a.add_argument(
        "--reserve",
        type=_spare,
        help="output_reserve_tokens: left free for the answer, when the body names no "
        "max_tokens of its own (the body's wins)",
    )
    a.add_argument("--margin", type=_spare, help="safety_margin_tokens: absorbs estimation error")
    a.add_argument(
        "--side-effect-tools",
        action="append",
        metavar="NAMES",
        help="comma-separated tools whose dropped calls are recorded in the ledger note",
    )
    a.add_argument(
        "--summarize",
        action="store_true",
        help="summarize dropped units with the deterministic extractive summarizer",
    )
    a.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the assembled body here (- for standard output, the default without --json)",
    )
    a.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    a.set_defaults(run=_assemble)

    v = sub.add_parser(
        "validate",
        help="check tool-call pairing (exit 1 when broken)",
        description="Check tool-call pairing by the provider's rules; exit 1 when broken.",
    )
    _session_args(v)
    v.add_argument(
        "--model", help="the model the request is for (checked against the models table)"
    )
    v.add_argument("--json", action="store_true", help="print the verdict as JSON on stdout")
    v.set_defaults(run=_validate)

    c = sub.add_parser(
        "count",
        help="count the tokens of a session",
        description="Count the tokens of a session as ringbound does for the budget: the "
        "number alone on standard output, what it was counted with (provider, encoding, "
        "token ratio, model) on standard error; or both as JSON with --json.",
    )
    _session_args(c)
    c.add_argument(
        "--model",
        help="count as for this model: its encoding and token ratio (see docs/models.md); "
        "default: the body's model when the models table knows it",
    )
    c.add_argument(
        "--encoding",
        choices=("o200k_base", "cl100k_base"),
        help="the BPE to count with (default: the model's, else o200k_base)",
    )
    c.add_argument("--json", action="store_true", help="print the count as JSON on stdout")
    c.set_defaults(run=_count)

    b = sub.add_parser(
        "bench",
        help="assembly latency (cold, p50, p99) and tokens/s on your own sessions",
        description="Assembly latency (cold, p50, p99) and tokens/s on your own sessions.",
    )
    b.add_argument("sessions", nargs="+", metavar="SESSION", help="JSON session files")
    _size_args(b, budget_help="the whole budget in tokens (no reserve, no margin)")
    b.add_argument(
        "--provider", choices=PROVIDERS, default="openai_chat", help="wire format (openai_chat)"
    )
    b.add_argument("--repeat", type=_positive, default=30, help="warm runs per session (30)")
    b.add_argument("--json", action="store_true", help="print the measurements as JSON")
    b.add_argument(
        "--progress",
        choices=("auto", "always", "never"),
        default="auto",
        help="progress bar on stderr; auto: when stdout is a terminal or the run is long",
    )
    b.set_defaults(run=_bench)

    d = sub.add_parser(
        "demo",
        help="assemble a bundled real session at shrinking budgets",
        description="Assemble a bundled real tau-bench session at shrinking budgets.",
    )
    d.set_defaults(run=_demo)

    i = sub.add_parser(
        "inspect",
        help="draw the context window an assembly makes: buckets, and every unit's fate",
        description="Assemble a session (or a request body) and draw its context map: the "
        "window by bucket (system, tools schema, pinned, ledger, summary, middle, recent, "
        "free, output reserve), then every ring and turn in order, kept, dropped, cut, "
        "stubbed or summarized, with its tokens and the stage that did it. In colour on a "
        "terminal, as plain text otherwise; sized as 'ringbound assemble' sizes it.",
    )
    _session_args(i)
    _size_args(i, budget_help="the whole budget in tokens (no reserve, no margin)")
    i.add_argument("--model", help="size the request for this model (see docs/models.md)")
    i.add_argument("--reserve", type=_spare, help="output_reserve_tokens, when the body names none")
    i.add_argument("--margin", type=_spare, help="safety_margin_tokens: absorbs estimation error")
    i.add_argument(
        "--side-effect-tools",
        action="append",
        metavar="NAMES",
        help="comma-separated tools whose dropped calls are recorded in the ledger note",
    )
    i.add_argument("--summarize", action="store_true", help="with the extractive summarizer")
    i.add_argument("--json", action="store_true", help="the map as JSON")
    i.add_argument("--html", metavar="PATH", help="also write the map as a self-contained page")
    i.add_argument("--width", type=_positive, help="columns to draw in (default: the terminal's)")
    i.set_defaults(run=_inspect)

    m = sub.add_parser(
        "simulate",
        help="replay a session turn by turn: cache-stable vs stateless vs trim_messages",
        description="Replay a session turn by turn: cache-stable vs stateless assembly vs "
        "LangChain's trim_messages, with the cached share and cost of each.",
    )
    m.add_argument("session", help="JSON: a list of messages or {messages, tools}")
    size = m.add_mutually_exclusive_group()
    size.add_argument("--budget", type=_tokens, help="the whole budget (default: half the session)")
    size.add_argument("--limit", type=_tokens, help="model_input_limit (reserve and margin apply)")
    m.add_argument("--config", help="YAML file with a context_assembly: block")
    m.add_argument("--provider", choices=PROVIDERS, help="wire format; default: detected")
    m.add_argument("--price-factor", type=float, default=0.1, help="price of a cached token (0.1)")
    m.add_argument("--summarize", action="store_true", help="with the extractive summarizer")
    m.add_argument("--per-turn", action="store_true", help="a row per turn as well")
    m.add_argument("--json", action="store_true", help="everything as JSON")
    m.add_argument(
        "--think-time",
        type=float,
        metavar="SECONDS",
        help="mean seconds between turns: the provider's cache expires after its lifetime, "
        "and a 'ringbound timed' way compacts once it has (compact_on_cache_expiry)",
    )
    m.add_argument("--seed", type=int, default=0, help="seed of the think times (0)")
    m.add_argument(
        "--plot",
        metavar="PATH",
        help="also draw it per turn into PATH.png or PATH.svg (needs matplotlib)",
    )
    m.add_argument(
        "--fidelity",
        action="store_true",
        help="instead: at each tool call, the share of the values it takes from earlier tool "
        "results that the assembled history still holds (at 30/50/70%% of each history, or "
        "--budget/--limit)",
    )
    m.set_defaults(run=_simulate)

    k = sub.add_parser(
        "calibrate",
        help="safety_margin_tokens and token_ratio from (local estimate, reported) usage",
        description="Recommend safety_margin_tokens and token_ratio from recorded usage.",
    )
    k.add_argument("usage", help="JSONL: one {local_estimate, prompt_tokens} object per line")
    k.add_argument("--coverage", type=float, default=0.999, help="share of requests covered")
    k.add_argument("--plot", help="write a PNG of the error distribution (needs matplotlib)")
    k.set_defaults(run=_calibrate)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except RingboundError as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (| head): stop quietly, as Unix tools do, and keep Python
        # from complaining again when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except OSError as e:
        # A file that cannot be read or written (missing, a directory, no permission): the
        # path and the system's reason, as Unix tools say it, and the exit of any error.
        where = e.filename if e.filename is not None else "?"
        print(f"error: {where}: {e.strerror or e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
