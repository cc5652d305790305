"""The load test of issue 14: one uvicorn worker serving ``gateway_app`` on loopback, loaded
by ``wrk`` with 200-turn request bodies (about 520 KB) of every provider, on three routes:
echo (parse and re-serialize), the dict path (parse, ``assemble``, serialize) and
``assemble_body``. Prints a markdown table of requests per second, p50 and p99.

With ``--turns N`` (128 by default) wrk sends N bodies in turn, one session's history each
with a different last tool result: every request is a next turn, as a gateway sees them (the
history met before, the last ring new). ``--turns 1`` replays one body, whose reading the core
keeps after the first request.

    apt-get install -y wrk   # the Debian package
    PYTHONPATH=python python benches/gateway_load.py [--seconds 10] [--connections 8]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import body_path
import providers

from ringbound.providers import PROVIDERS

ROUTES = ("echo", "dict", "body")
BENCHES = Path(__file__).resolve().parent
#: wrk's requests: POSTs of the files BODY_FILE.0 .. BODY_FILE.(BODY_COUNT - 1), in turn.
LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local bodies = {}
local count = tonumber(os.getenv("BODY_COUNT"))
for i = 0, count - 1 do
  local f = io.open(os.getenv("BODY_FILE") .. "." .. i, "rb")
  bodies[i + 1] = f:read("*a")
  f:close()
end
local next_body = 0
request = function()
  next_body = next_body % count + 1
  return wrk.format(nil, nil, nil, bodies[next_body])
end
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, body: bytes, timeout: float = 60) -> None:
    """Returns once the server answers a request (and the route is warm), else raises."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, data=body)) as r:
                r.read()
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def to_ms(value: str, unit: str) -> float:
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def turns(chat: list[dict[str, Any]], count: int) -> list[list[dict[str, Any]]]:
    """``count`` next turns of one session: its history, each with another last result."""
    last = max(i for i, m in enumerate(chat) if m["role"] == "tool")
    out = []
    for n in range(count):
        turn = list(chat)
        turn[last] = {**chat[last], "content": f"{chat[last]['content']} (run {n})"}
        out.append(turn)
    return out


def run_wrk(
    url: str, body_file: Path, count: int, lua: Path, seconds: int, connections: int
) -> dict:
    env = {**os.environ, "BODY_FILE": str(body_file), "BODY_COUNT": str(count)}
    cmd = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--timeout", "60s", "--latency"]
    cmd += ["-s", str(lua), url]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if "Non-2xx" in out or (errors and any(int(n) for n in errors.groups())):
        raise RuntimeError(f"wrk saw failed requests:\n{out}")
    pct: dict[str, float] = {}
    for p, value, unit in re.findall(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M):
        pct[p] = to_ms(value, unit)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    return {"rps": rps, "p50": pct["50"], "p99": pct["99"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=int, default=10, help="wrk duration per route (10)")
    p.add_argument("--connections", type=int, default=8, help="wrk connections (8)")
    p.add_argument("--providers", nargs="*", default=list(PROVIDERS))
    p.add_argument(
        "--turns", type=int, default=128, help="next-turn bodies sent in turn (128; 1 replays one)"
    )
    args = p.parse_args()
    chat = providers.chat_session()
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(BENCHES), os.environ.get("PYTHONPATH", "")]),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "gateway_app:app", "--host", "127.0.0.1",
         "--port", str(port), "--workers", "1", "--log-level", "warning", "--no-access-log"],
        env=env,
    )  # fmt: skip
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            lua = Path(tmp) / "post.lua"
            lua.write_text(LUA)
            sessions = turns(chat, max(1, args.turns))
            for provider in args.providers:
                body_file = Path(tmp) / f"{provider}.json"
                for n, session in enumerate(sessions):
                    data = body_path.body(provider, session)
                    Path(f"{body_file}.{n}").write_bytes(data)
                for route in ROUTES:
                    url = f"http://127.0.0.1:{port}/{route}/{provider}"
                    wait_up(url, data)
                    r = run_wrk(url, body_file, len(sessions), lua, args.seconds, args.connections)
                    rows.append((provider, len(data), route, r))
                    print(f"{provider} {route}: {r}", file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(
        f"wrk -t2 -c{args.connections} -d{args.seconds}s, one uvicorn worker, loopback, "
        f"{len(sessions)} bodies in turn\n"
    )
    print("| provider | body KB | route | req/s | p50 ms | p99 ms | vs echo |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    echo = {prov: r["rps"] for prov, _, route, r in rows if route == "echo"}
    for provider, size, route, r in rows:
        print(
            f"| {provider} | {size // 1000} | {route} | {r['rps']:.0f} | {r['p50']:.1f} | "
            f"{r['p99']:.1f} | {r['rps'] / echo[provider]:.2f}x |"
        )
    print(f"\nLoad average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores.")


if __name__ == "__main__":
    main()
