"""The reference workload of the performance bars: a generated coding-agent session (parallel
tool calls, source files, pytest logs, JSON payloads, some base64, short errors), seeded so
every run measures the same bytes, and the largest real sessions of the shared corpus."""

from __future__ import annotations

import base64
import copy
import json
import os
import random
from pathlib import Path
from pydoc_data.topics import topics
from typing import Any

import orjson

import ringbound as rb

Message = dict[str, Any]

SEED = 3
#: About 500 messages and 120k o200k tokens (checked by ``test_reference_session_shape``).
REFERENCE_MESSAGES = 500
BUDGET = 32_000
MB = 1_000_000

# Same path logic as tests/conftest.py, computed here so benches import nothing from tests.
REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("RINGBOUND_CORPUS", REPO.parent / "shared" / "corpus"))

#: Real English for the prose parts: the topic texts of Python's own documentation, shipped
#: with CPython. A small vocabulary would tokenize about twice as fast as real text does.
DOCS = "\n\n".join(topics[k] for k in sorted(topics))
DOC_WORDS = DOCS.split()
NOUNS = (
    "session request token budget cache config parser report handler client record buffer "
    "index ring message stage ledger schema payload batch worker queue".split()
)
VERBS = "load parse count build check merge apply render split fetch store drop".split()
TOOLS = ("read_file", "run_tests", "grep", "http_get", "list_dir", "write_file")


def assembler(
    budget: int = BUDGET, encoding: str = "o200k_base", provider: str = "openai_chat"
) -> rb.Assembler:
    """The benchmarks' policy: defaults, with the whole budget for the request (no output
    reserve, no safety margin)."""
    cfg = rb.AssemblyConfig(
        model_input_limit=budget,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        encoding=encoding,
    )
    return rb.Assembler(cfg, provider=provider)


def prose(rng: random.Random, words: int) -> str:
    """``words`` consecutive words of the documentation, from a random place."""
    start = rng.randrange(len(DOC_WORDS) - words)
    return " ".join(DOC_WORDS[start : start + words])


def _ident(rng: random.Random) -> str:
    return f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}"


def python_source(rng: random.Random, functions: int) -> str:
    """A Python module of small functions: indentation, identifiers, docstrings, literals."""
    lines = ['"""' + prose(rng, 12) + '"""', "", "import json", "import os", ""]
    for _ in range(functions):
        name, arg, other = _ident(rng), rng.choice(NOUNS), rng.choice(NOUNS)
        lines += [
            "",
            f"def {name}(self, {arg}, {other}=None, *, limit={rng.randint(1, 4096)}):",
            f'    """{prose(rng, 10)}"""',
            f"    if {other} is None:",
            f"        {other} = self._{arg}s.get({arg}.id, {rng.randint(0, 99)})",
            f"    for i, item in enumerate({arg}.items[:limit]):",
            f"        if item.{rng.choice(NOUNS)} > {rng.random():.3f}:",
            f'            raise ValueError(f"{arg} {{i}} is over the limit: {{item!r}}")',
            f"    return json.dumps({{'{arg}': {arg}.id, '{other}': {other}}})",
        ]
    return "\n".join(lines) + "\n"


def pytest_log(rng: random.Random, tests: int) -> str:
    """A pytest run as an agent sees it: banner lines, progress, one failure with a traceback."""
    names = [f"tests/test_{rng.choice(NOUNS)}.py::test_{_ident(rng)}" for _ in range(tests)]
    failed = rng.choice(names)
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0",
        "rootdir: /workspace/repo",
        f"collected {tests} items",
        "",
    ]
    lines += [f"{n} {'FAILED' if n == failed else 'PASSED'}" for n in names]
    lines += [
        "",
        "=================================== FAILURES ===================================",
        f"_____________________________ {failed.split('::')[1]} _____________________________",
        "",
        "    def test_case():",
        f">       assert {_ident(rng)}(payload) == {rng.randint(0, 999)}",
        f"E       AssertionError: assert {rng.randint(0, 999)} == {rng.randint(0, 999)}",
        "",
        f"tests/{failed.split('::')[0].split('/')[1]}:{rng.randint(10, 400)}: AssertionError",
        f"========================= 1 failed, {tests - 1} passed in "
        f"{rng.uniform(0.5, 9):.2f}s =========================",
    ]
    return "\n".join(lines) + "\n"


def json_payload(rng: random.Random, records: int) -> str:
    """An API response: a list of records with ids, timestamps, numbers and short texts."""
    doc = {
        "status": "ok",
        "page": rng.randint(1, 9),
        "items": [
            {
                "id": f"{rng.getrandbits(64):016x}",
                "created_at": f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T0{rng.randint(0, 9)}"
                f":{rng.randint(10, 59)}:{rng.randint(10, 59)}Z",
                "name": _ident(rng),
                "score": round(rng.uniform(0, 100), 3),
                "tags": rng.sample(NOUNS, 3),
                "note": prose(rng, 8),
            }
            for _ in range(records)
        ],
    }
    return json.dumps(doc, indent=2 if rng.random() < 0.5 else None)


def base64_blob(rng: random.Random, raw_bytes: int) -> str:
    return base64.b64encode(rng.randbytes(raw_bytes)).decode()


class SessionWriter:
    """Writes one session's messages; call ids are unique within the session."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.calls = 0
        self.messages: list[Message] = [
            {"role": "system", "content": "You are a coding agent. " + prose(self.rng, 1200)},
            {"role": "user", "content": "Fix the failing tests. " + prose(self.rng, 60)},
        ]

    def _call_id(self) -> str:
        self.calls += 1
        tail = "".join(
            self.rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", k=20)
        )
        return f"call_{self.calls:04d}{tail}"

    def result(self, tool: str) -> str:
        rng = self.rng
        if rng.random() < 0.08:
            return f"Error: {tool} failed: No such file or directory: 'src/{_ident(rng)}.py'"
        if tool == "read_file":
            return python_source(rng, rng.randint(3, 9))
        if tool == "run_tests":
            return pytest_log(rng, rng.randint(10, 40))
        if tool == "http_get":
            if rng.random() < 0.15:
                return "data:application/octet-stream;base64," + base64_blob(rng, 1500)
            return json_payload(rng, rng.randint(1, 7))
        if tool == "grep":
            return "\n".join(
                f"src/{rng.choice(NOUNS)}.py:{rng.randint(1, 900)}:    {_ident(rng)}(self)"
                for _ in range(rng.randint(3, 30))
            )
        if tool == "list_dir":
            return "\n".join(f"{_ident(rng)}.py" for _ in range(rng.randint(5, 30)))
        return f"Wrote {rng.randint(100, 9000)} bytes to src/{_ident(rng)}.py"

    def ring(self) -> list[Message]:
        """An assistant turn with one to four parallel calls, and their results."""
        rng = self.rng
        calls = []
        for _ in range(rng.choices((1, 2, 3, 4), weights=(5, 3, 2, 1))[0]):
            tool = rng.choice(TOOLS)
            args = {"path": f"src/{_ident(rng)}.py", "reason": prose(rng, 6)}
            calls.append(
                {
                    "id": self._call_id(),
                    "type": "function",
                    "function": {"name": tool, "arguments": json.dumps(args)},
                }
            )
        content = prose(rng, rng.randint(10, 40)) if rng.random() < 0.4 else None
        out: list[Message] = [{"role": "assistant", "content": content, "tool_calls": calls}]
        for c in calls:
            text = self.result(c["function"]["name"])
            out.append({"role": "tool", "tool_call_id": c["id"], "content": text})
        return out

    def grow(self, messages: int) -> list[Message]:
        """Adds rings (and now and then a plain exchange) until ``messages`` are reached; the
        session ends with tool results, as the next request of an agent loop does."""
        while len(self.messages) < messages:
            if self.rng.random() < 0.1:
                self.messages += [
                    {"role": "assistant", "content": prose(self.rng, 80)},
                    {"role": "user", "content": "Continue. " + prose(self.rng, 15)},
                ]
            self.messages += self.ring()
        return self.messages


def reference_session(seed: int = SEED, messages: int = REFERENCE_MESSAGES) -> list[Message]:
    """The reference workload: a coding-agent session of about ``messages`` messages."""
    return SessionWriter(seed).grow(messages)


def next_ring(history: list[Message], turn: int) -> list[Message]:
    """The ring that the next turn adds to ``history``: new content, call ids not in history."""
    writer = SessionWriter(seed=1_000_003 * (turn + 1))
    writer.calls = 10_000 * (turn + 1) + len(history)
    return writer.ring()


def session_of_size(nbytes: int, seed: int = SEED) -> list[Message]:
    """A session whose orjson serialization is at least ``nbytes`` (the memory bar's input)."""
    writer = SessionWriter(seed)
    size = 0
    while size < nbytes:
        ring = writer.ring()
        writer.messages += ring
        size += len(orjson.dumps(ring))
    return writer.messages


def prose_text(nbytes: int) -> str:
    """The documentation (470 KB) repeated to ``nbytes``."""
    return (DOCS * (nbytes // len(DOCS) + 1))[:nbytes]


def base64_text(nbytes: int) -> str:
    return base64_blob(random.Random(SEED), nbytes * 3 // 4 + 3)[:nbytes]


def one_char_text(nbytes: int) -> str:
    return "a" * nbytes


def padded_log_text(nbytes: int) -> str:
    """``x`` plus 491 dashes, repeated: the slow band of docs/token-accounting.md."""
    unit = "x" + "-" * 491
    return (unit * (nbytes // len(unit) + 1))[:nbytes]


# The corpus ---------------------------------------------------------------------------------


def swe_agent_messages(history: list[Message]) -> list[Message]:
    """SWE-agent history → OpenAI messages (tests/test_corpus.py documents the conversion)."""
    out = []
    for message in history:
        m = {
            k: v
            for k, v in message.items()
            if k not in ("thought", "action", "agent", "message_type")
        }
        if "tool_call_ids" in m:
            m["tool_call_id"] = m.pop("tool_call_ids")[0]
        out.append(m)
    return out


def _cut_after_last_user_or_tool(messages: list[Message]) -> list[Message]:
    last = max(i for i, m in enumerate(messages) if m["role"] in ("user", "tool"))
    return messages[: last + 1]


def corpus_sessions(count: int = 3) -> list[tuple[str, list[Message], list[Any] | None]]:
    """The ``count`` largest real sessions (by serialized size) as ``(name, messages, tools)``,
    each a valid next request: swe-gym's trailing unanswered call is cut, SWE-agent's result
    ids converted. Raises FileNotFoundError without the corpus."""
    found: list[tuple[str, list[Message], list[Any] | None]] = []
    for run in json.loads((CORPUS / "tau-bench" / "gpt-4o-airline.json").read_text()):
        found.append((f"tau-bench/{run['task_id']}-{run['trial']}", run["traj"], None))
    for s in json.loads((CORPUS / "swe-gym" / "sample_raw.json").read_text()):
        tools = copy.deepcopy(s["tools"])
        for t in tools:  # swe-gym's `finish` has `parameters: null`: same meaning as absent
            if t.get("function", {}).get("parameters", {}) is None:
                del t["function"]["parameters"]
        found.append(
            (f"swe-gym/{s['instance_id']}", _cut_after_last_user_or_tool(s["messages"]), tools)
        )
    for path in sorted((CORPUS / "swe-agent").glob("*.traj")):
        history = json.loads(path.read_text())["history"]
        found.append((f"swe-agent/{path.stem}", swe_agent_messages(history), None))
    found.sort(key=lambda s: len(json.dumps(s[1])), reverse=True)
    return found[:count]
