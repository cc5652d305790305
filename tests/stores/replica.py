"""One gateway replica in its own process, for the multi-process tests: it reads one JSON
request a line (``{"session": id, "end": N}``: serve the generated session's first N
messages under that session id; with
``"executed": "call-id"``, its execution layer also ran a side effect of that id), assembles
it with ``session_id`` against the RedisStore at argv[1], and writes the request it would send
and what the report says, one JSON line per request."""

from __future__ import annotations

import os
import sys

import orjson

import ringbound as rb
from ringbound.cli.simulate import SIDE_EFFECT_TOOLS, agent_session


def main() -> None:
    url, turns, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    session = agent_session(turns=turns)
    cfg = rb.AssemblyConfig(
        model_input_limit=limit,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        side_effect_tools=SIDE_EFFECT_TOOLS,
    )
    asm = rb.Assembler(cfg, store=rb.RedisStore(url, prefix="replicas:", timeout_s=5))
    for line in sys.stdin:
        request = orjson.loads(line)
        ledger = rb.SideEffectLedger()
        if "executed" in request:
            ledger.record("send_email", request["executed"])
        res = asm.assemble(session[: request["end"]], session_id=request["session"], ledger=ledger)
        out = {
            "messages": res.messages,
            "state": res.report.state,
            "loaded": res.report.store.loaded,
            "saved": res.report.store.saved,
            "compactions": res.state.compactions if res.state is not None else None,
            "conflicts": res.report.store.conflicts,
            "pid": os.getpid(),
        }
        sys.stdout.buffer.write(orjson.dumps(out) + b"\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
