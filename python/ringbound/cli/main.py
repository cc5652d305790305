"""The ``ringbound`` command: assemble, validate, count and benchmark session files, and the
demo."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import orjson

from .. import __version__
from ..assembler import Assembler
from ..config import AssemblyConfig
from ..counting import count_tokens, validate
from ..errors import RingboundError
from ..providers import PROVIDERS
from ..summary import summarizers
from .bench import bench_sessions, format_table
from .demo import run_demo
from .session import Session, load_session

__all__ = ["main"]


def _config(args: argparse.Namespace) -> AssemblyConfig:
    cfg = AssemblyConfig.from_yaml(args.config) if args.config else AssemblyConfig()
    values = cfg.to_dict()
    if args.limit is not None:
        values["model_input_limit"] = args.limit
    if args.budget is not None:
        values.update(
            model_input_limit=args.budget, output_reserve_tokens=0, safety_margin_tokens=0
        )
    if args.repair:
        values["on_pairing_error"] = "synthesize_error_results"
    return AssemblyConfig.from_dict(values)


def _assemble(args: argparse.Namespace) -> int:
    session = load_session(args.session)
    provider = _provider(args, session)
    summarizer = summarizers.extractive() if args.summarize else None
    res = Assembler(_config(args), provider=provider, summarizer=summarizer).assemble(
        session.messages, session.tools, system=session.system
    )
    r = res.report
    if args.json:
        sys.stdout.write(orjson.dumps(r.to_dict(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        bound = "" if r.tokens_before_exact else " at most"
        print(f"tokens  {bound} {r.tokens_before} -> {r.tokens_after} (budget {r.budget})")
        print(f"messages {r.messages_before} -> {r.messages_after}")
        for s in r.stages:
            print(f"stage    {s.stage}: {s.units} unit(s), {s.tokens_saved} tokens saved")
        if r.repairs:
            print(f"repaired {len(r.repairs)} call(s) without result: {', '.join(r.repairs)}")
        for w in r.rewrites:
            print(f"rewrote  message {w.index} ({w.kind}), {w.tokens_saved} tokens saved")
        if r.summary is not None:
            s = r.summary
            state = "failed: " + str(s.reason) if s.failed else (s.reason or "written")
            print(f"summary  {s.units} unit(s) -> {s.tokens} tokens ({state})")
        if r.ledger_entries:
            print(f"ledger   {r.ledger_entries} side-effecting call(s) recorded")
        print("buckets  " + ", ".join(f"{k} {v}" for k, v in r.bucket_tokens.items()))
        print(f"time     {r.elapsed_s * 1000:.2f} ms")
    if args.output:
        body: object = res.messages
        if not session.bare:
            body = {session.messages_key: res.messages}
            if session.system_key is not None:
                body[session.system_key] = res.system
            if res.tools is not None:
                body["tools"] = res.tools
        with open(args.output, "wb") as f:
            f.write(orjson.dumps(body, option=orjson.OPT_INDENT_2))
    return 0


def _provider(args: argparse.Namespace, session: Session) -> str:
    """The provider asked for, else the one the body's format shows."""
    return args.provider or session.detected_provider()


def _validate(args: argparse.Namespace) -> int:
    session = load_session(args.session)
    provider = _provider(args, session)
    issues = validate(session.messages, provider=provider, system=session.system)
    for i in issues:
        print(f"messages[{i.index}] {i.kind}: {i.message}")
    if not issues:
        print("pairing valid")
    return 1 if issues else 0


def _count(args: argparse.Namespace) -> int:
    session = load_session(args.session)
    provider = _provider(args, session)
    print(
        count_tokens(
            session.messages, provider, args.encoding, session.tools, system=session.system
        )
    )
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


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _demo(args: argparse.Namespace) -> int:
    return 1 if run_demo(sys.stdout) else 0


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
    )


def _calibrate(args: argparse.Namespace) -> int:
    from .calibrate import cli_main

    return cli_main(args.usage, args.coverage, args.plot)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ringbound", description=__doc__)
    p.add_argument("--version", action="version", version=f"ringbound {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    a = sub.add_parser("assemble", help="assemble a session into a request that fits")
    a.add_argument("session", help="JSON: a list of messages or {messages, tools}")
    a.add_argument("--config", help="YAML file with a context_assembly: block")
    a.add_argument("--limit", type=int, help="model_input_limit (reserve and margin still apply)")
    a.add_argument("--budget", type=int, help="the whole budget (no reserve, no margin)")
    a.add_argument("--repair", action="store_true", help="synthesize results for unanswered calls")
    a.add_argument(
        "--summarize",
        action="store_true",
        help="summarize dropped units with the deterministic extractive summarizer",
    )
    a.add_argument("--provider", choices=PROVIDERS, help="default: detected from the body")
    a.add_argument("-o", "--output", help="write the assembled request here")
    a.add_argument("--json", action="store_true", help="print the report as JSON")
    a.set_defaults(run=_assemble)

    v = sub.add_parser("validate", help="check tool-call pairing (exit 1 when broken)")
    v.add_argument("session")
    v.add_argument("--provider", choices=PROVIDERS, help="default: detected from the body")
    v.set_defaults(run=_validate)

    c = sub.add_parser("count", help="count the tokens of a session")
    c.add_argument("session")
    c.add_argument("--provider", choices=PROVIDERS, help="default: detected from the body")
    c.add_argument("--encoding", default="o200k_base", choices=("o200k_base", "cl100k_base"))
    c.set_defaults(run=_count)

    b = sub.add_parser(
        "bench", help="assembly latency (cold, p50, p99) and tokens/s on your own sessions"
    )
    b.add_argument("sessions", nargs="+", metavar="SESSION", help="JSON session files")
    size = b.add_mutually_exclusive_group()
    size.add_argument("--budget", type=int, help="the whole budget (no reserve, no margin)")
    size.add_argument("--limit", type=int, help="model_input_limit (reserve and margin apply)")
    b.add_argument("--config", help="YAML file with a context_assembly: block")
    b.add_argument("--repair", action="store_true", help="synthesize results for unanswered calls")
    b.add_argument("--provider", default="openai_chat")
    b.add_argument("--repeat", type=_positive, default=30, help="warm runs per session (30)")
    b.add_argument("--json", action="store_true", help="print the measurements as JSON")
    b.add_argument(
        "--progress",
        choices=("auto", "always", "never"),
        default="auto",
        help="progress bar on stderr; auto: when stdout is a terminal or the run is long",
    )
    b.set_defaults(run=_bench)

    d = sub.add_parser("demo", help="assemble a bundled real session at shrinking budgets")
    d.set_defaults(run=_demo)

    m = sub.add_parser(
        "simulate",
        help="replay a session turn by turn: cache-stable vs stateless vs trim_messages",
    )
    m.add_argument("session", help="JSON: a list of messages or {messages, tools}")
    size = m.add_mutually_exclusive_group()
    size.add_argument("--budget", type=int, help="the whole budget (default: half the session)")
    size.add_argument("--limit", type=int, help="model_input_limit (reserve and margin apply)")
    m.add_argument("--config", help="YAML file with a context_assembly: block")
    m.add_argument("--provider", choices=PROVIDERS, help="default: detected from the body")
    m.add_argument("--price-factor", type=float, default=0.1, help="price of a cached token (0.1)")
    m.add_argument("--summarize", action="store_true", help="with the extractive summarizer")
    m.add_argument("--per-turn", action="store_true", help="a row per turn as well")
    m.add_argument("--json", action="store_true", help="everything as JSON")
    m.set_defaults(run=_simulate)

    k = sub.add_parser(
        "calibrate",
        help="safety_margin_tokens and token_ratio from (local estimate, reported) usage",
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


if __name__ == "__main__":
    sys.exit(main())
