"""What a provider count adds to an assembly: each official SDK client over its mock transport
(an answer in microseconds, so what is left is ringbound's gate, the thread hand-off, the SDK's
request building and its JSON), against the same assembly counted locally. Markdown on stdout.

    python benches/counter_latency.py [--repeat N] [--rings R] [--only SDK ...] [--freeze]

Medians of ``--repeat`` perf_counter timings, the cases timed in turn within each round. A real
count adds the network round trip to the provider on top (see docs/calibration.md)."""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "counters"))

from botocore.awsrequest import AWSResponse
from sdk_mocks import FORMAT, Provider, bedrock_client, counter_for, session

import ringbound as rb

SDKS = ("openai", "anthropic", "gemini", "bedrock")


def _cases(rings: int, sdks: tuple[str, ...]) -> dict[str, Callable[[], object]]:
    cases: dict[str, Callable[[], object]] = {}
    limit = 200_000
    for name in sdks:
        fmt = FORMAT[name]
        messages, system = session(fmt, rings)
        local = rb.Assembler(
            rb.AssemblyConfig(model_input_limit=limit, token_counter="tiktoken"), provider=fmt
        )
        tokens = local.assemble(messages, system=system).report.tokens_after
        if name == "bedrock":
            # The answer botocore's Stubber would give, without its queue: thousands of
            # queued answers made every garbage collection of the run slower.
            client, _ = bedrock_client()
            answer = (AWSResponse(None, 200, {}, None), {"inputTokens": tokens})
            client.meta.events.register(
                "before-call.bedrock-runtime.CountTokens", lambda a=answer, **_: a
            )
            counter = rb.counters.bedrock(client, model="m")
        else:
            counter = counter_for(name, Provider(tokens=tokens, keep=False))
        checked = rb.Assembler(
            rb.AssemblyConfig(model_input_limit=limit, token_counter="provider"),
            provider=fmt,
            counter=counter,
        )
        gated = rb.Assembler(
            rb.AssemblyConfig(model_input_limit=limit), provider=fmt, counter=counter
        )

        def run(asm: rb.Assembler, m: list = messages, s: object = system) -> object:
            return asm.assemble(m, system=s)

        final = local.assemble(messages, system=system)
        kwargs = counter._request(final.messages, final.tools, final.system, fmt)
        cases[f"{name}: local only"] = lambda a=local, r=run: r(a)
        cases[f"{name}: far under budget (no count)"] = lambda a=gated, r=run: r(a)
        cases[f"{name}: provider count"] = lambda a=checked, r=run: r(a)
        cases[f"{name}: the SDK call alone, same thread"] = lambda c=counter, k=kwargs: c._target()(
            **k
        )
    return cases


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--rings", type=int, default=50)
    parser.add_argument(
        "--only",
        action="append",
        choices=SDKS,
        help="time this SDK only (repeatable); a gateway loads one or two, and each SDK's "
        "code in the process slows the others' (see docs/calibration.md)",
    )
    parser.add_argument(
        "--freeze",
        action="store_true",
        help="gc.freeze() after set-up, as a gateway does after start-up: the SDKs' imports "
        "leave a large heap that every full collection would walk",
    )
    args = parser.parse_args()
    load = os.getloadavg()[0]
    cases = _cases(args.rings, tuple(args.only or SDKS))
    for case in cases.values():  # warm the caches and the SDKs' lazy imports
        case()
    if args.freeze:
        gc.freeze()
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.repeat):
        for k, case in cases.items():
            start = time.perf_counter()
            case()
            times[k].append(time.perf_counter() - start)
    print(f"{args.rings} tool rings, median of {args.repeat} runs\n")
    print(f"load average before: {load:.1f}, after: {os.getloadavg()[0]:.1f}\n")
    print("| case | median (ms) | added to local only (ms) |")
    print("| --- | ---: | ---: |")
    base = 0.0
    for k, ts in times.items():
        median = statistics.median(ts) * 1000
        if k.endswith("local only"):
            base = median
        added = "" if "SDK call" in k else f"{median - base:+.3f}"
        print(f"| {k} | {median:.3f} | {added} |")


if __name__ == "__main__":
    main()
