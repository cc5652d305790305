"""A headless Chromium driven over the DevTools protocol, for tests that open a page the way a
reader does: it records console messages and uncaught exceptions from before the page loads,
evaluates script in it and takes a screenshot. Debian's ``chromium`` (installed by ``.ci/run``)
and the ``websockets`` client are all it needs."""

from __future__ import annotations

import base64
import itertools
import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

__all__ = ["Chromium", "Visit", "chromium_binary"]


def chromium_binary() -> str | None:
    """The Chromium on PATH (Debian names it ``chromium``), or None."""
    return next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p),
        None,
    )


@dataclass
class Visit:
    """What opening a page showed."""

    console: list[tuple[str, str]] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    png: bytes = b""

    @property
    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads."""
        return (
            [text for level, text in self.console if level == "error"]
            + self.exceptions
            + self.failed_requests
        )


class Chromium:
    """One headless browser process, closed with the context manager."""

    def __init__(self, binary: str, width: int = 1200, height: int = 900) -> None:
        self._profile = tempfile.mkdtemp(prefix="ringbound-chromium-")
        self._proc = subprocess.Popen(
            [
                binary,
                "--headless=new",
                "--no-sandbox",  # CI runs as root, where the sandbox refuses to start
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
                f"--user-data-dir={self._profile}",
                f"--window-size={width},{height}",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._port = self._listening_port()
        self._ids = itertools.count(1)

    def _listening_port(self) -> int:
        assert self._proc.stderr is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self._proc.stderr.readline()
            if not line and self._proc.poll() is not None:
                break
            found = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if found:
                return int(found.group(1))
        self.close()
        raise RuntimeError("chromium did not open its DevTools port")

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stderr is not None:
            self._proc.stderr.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def visit(self, path: Path, script: str | None = None) -> tuple[Visit, Any]:
        """Opens ``path``, waits for its load event, evaluates ``script`` (its value is
        returned) and takes a full-page screenshot."""
        # A tab of its own, so no event of an earlier page is counted against this one.
        base = f"http://127.0.0.1:{self._port}/json"
        with urllib.request.urlopen(
            urllib.request.Request(f"{base}/new?about:blank", method="PUT")
        ) as r:
            page = json.load(r)
        try:
            return self._visit(page, path, script)
        finally:
            urllib.request.urlopen(f"{base}/close/{page['id']}").close()

    def _visit(self, page: dict[str, Any], path: Path, script: str | None) -> tuple[Visit, Any]:
        visit = Visit()
        with connect(page["webSocketDebuggerUrl"], max_size=64 * 2**20) as ws:

            def call(method: str, **params: Any) -> Any:
                ident = next(self._ids)
                ws.send(json.dumps({"id": ident, "method": method, "params": params}))
                while True:
                    msg = json.loads(ws.recv(timeout=30))
                    if msg.get("id") == ident:
                        if "error" in msg:
                            raise RuntimeError(f"{method}: {msg['error']}")
                        return msg.get("result", {})
                    self._event(msg, visit)

            for domain in ("Runtime", "Log", "Page", "Network"):
                call(f"{domain}.enable")
            call("Page.navigate", url=path.resolve().as_uri())
            deadline = time.monotonic() + 30
            loaded = False
            while not loaded and time.monotonic() < deadline:
                msg = json.loads(ws.recv(timeout=30))
                loaded = msg.get("method") == "Page.loadEventFired"
                self._event(msg, visit)
            value = None
            if script is not None:
                got = call("Runtime.evaluate", expression=script, returnByValue=True)
                value = got.get("result", {}).get("value")
            shot = call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
            visit.png = base64.b64decode(shot["data"])
        return visit, value

    @staticmethod
    def _event(msg: dict[str, Any], visit: Visit) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            visit.console.append((params["type"], text))
        elif method == "Log.entryAdded":
            entry = params["entry"]
            visit.console.append((entry["level"], entry["text"]))
        elif method == "Runtime.exceptionThrown":
            visit.exceptions.append(params["exceptionDetails"].get("text", "exception"))
        elif method == "Network.loadingFailed":
            visit.failed_requests.append(params.get("errorText", "failed"))
        elif method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if not url.startswith(("file:", "data:", "about:")):
                visit.failed_requests.append(f"the page fetched {url}")
