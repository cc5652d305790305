"""A real LiteLLM proxy as its own process on loopback: started from a config file with a given
environment, waited for until it answers, posted to, and stopped with its process group."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The proxy imports all of LiteLLM: on a busy two-core machine that takes most of a minute.
START_TIMEOUT_S = 240


@dataclass(frozen=True)
class Proxy:
    url: str
    key: str
    log: Path
    #: Where the test's hook writes what it did, when it has one.
    metrics: Path | None = None

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        req = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {self.key}",
                "x-api-key": self.key,
                "anthropic-version": "2023-06-01",
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")


def pythonpath() -> str:
    """The proxy's PYTHONPATH: first the folder of the ringbound this process imported (the
    repository's python/ with an editable install, site-packages with ``pip install .``,
    where the repository's python/ holds no built extension and would hide the installed
    one), then the caller's own entries (an empty one would add the working folder)."""
    import ringbound

    own = str(Path(ringbound.__file__).resolve().parent.parent)
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join([own, *rest])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_proxy(config: Path, env: dict[str, str], key: str, work: Path) -> Iterator[Proxy]:
    """The proxy serving ``config`` (its callbacks found beside it) with ``env``, its output
    in ``work/proxy.log``; stopped on exit. Fails the test if it exits or does not start."""
    import pytest

    port = free_port()
    log = work / "proxy.log"
    cmd = [sys.executable, "-m", "litellm.proxy.proxy_cli", "--config", str(config)]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--telemetry", "False"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the proxy exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(url + "/health/liveliness", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the proxy did not start in time:\n{log.read_text()[-4000:]}")
            time.sleep(0.5)
        yield Proxy(url, key, log)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
