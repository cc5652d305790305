"""A real ``redis-server`` for the tests and the benchmark: started on a free loopback port
with a directory of its own, killed, paused or stopped on request. A missing ``redis-server``
(the Debian package, installed by ``.ci/redis``) or redis-py fails the caller; it is skipped
only when ``RINGBOUND_SKIP_REDIS=1`` says so explicitly."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest


def need_redis() -> str:
    """The redis-server binary, after checking redis-py; fails (or skips on request)."""
    binary = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None
    )
    missing = []
    if binary is None:
        missing.append("redis-server (Debian package redis-server; see .ci/redis)")
    try:
        import redis  # noqa: F401
    except ImportError:
        missing.append("redis-py (pip install -e '.[dev]')")
    if missing:
        what = " and ".join(missing)
        if os.environ.get("RINGBOUND_SKIP_REDIS") == "1":
            pytest.skip(f"RINGBOUND_SKIP_REDIS=1 and {what} missing")
        pytest.fail(f"the Redis store tests need {what}; set RINGBOUND_SKIP_REDIS=1 to skip")
    assert binary is not None
    return binary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server process on loopback; its append-only file makes a record written
    before ``kill()`` survive ``start()`` (with ``appendfsync`` ``always``, the default here,
    every write waits for its fsync; ``everysec`` is Redis's recommended trade-off; None:
    no append-only file, nothing survives)."""

    def __init__(self, binary: str, workdir: Path, appendfsync: str | None = "always") -> None:
        self.appendfsync = appendfsync
        self.binary = binary
        self.dir = workdir
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--dir", str(self.dir),
                "--save", "",
                "--appendonly", "no" if self.appendfsync is None else "yes",
                "--appendfsync", self.appendfsync or "no",
                "--daemonize", "no",
                "--logfile", str(self.dir / "redis.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = (self.dir / "redis.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"redis-server exited with {self.proc.returncode}: {log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        self.stop()
        pytest.fail("redis-server did not answer PING within 10 s")

    def kill(self) -> None:
        """SIGKILL: the server dies mid-run, as a crashed node would."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc = None

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
            self.proc = None
