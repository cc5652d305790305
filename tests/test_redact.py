"""Redaction: every builtin kind is caught and counted, the caller's patterns too, ordinary
text is left alone, and adversarial inputs stay linear."""

from __future__ import annotations

import logging
import time

import pytest
from canonical_writers import from_canonical
from hypothesis import given
from hypothesis import strategies as st

from ringbound.errors import ConfigError
from ringbound.summary.redact import KINDS, Redactor, redacted_value

PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEA7bq9xZ1pZ0mZc3Qm0x1u\n"
    "k2d9vXw+Qe1r8Yb0p3LqYt7ZsLQ9n2Hc0Q==\n"
    "-----END RSA PRIVATE KEY-----"
)
SECRETS = {
    "private_key": PRIVATE_KEY,
    "openai_key": "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789",
    "anthropic_key": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx0123",
    "aws_access_key": "AKIAIOSFODNN7EXAMPLE",
    "bearer_token": "Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    "github_token": "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9",
    "aws_secret_key": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "url_credentials": "postgres://app:s3cr3t-Passw0rd@db.internal:5432/prod",
}
#: What of each secret is not secret and stays: the words around it.
KEPT = {
    "bearer_token": ("Bearer",),
    "aws_secret_key": ("aws_secret_access_key",),
    "url_credentials": ("postgres://app:", "@db.internal:5432/prod"),
}


def _survivors(secret: str, text: str) -> list[str]:
    """Pieces of ``secret`` still in ``text`` beyond the words around it that may stay."""
    for kept in (k for words in KEPT.values() for k in words):
        secret = secret.replace(kept, " ")
    return [w for w in secret.split() if len(w) > 2 and w not in "=:" and w in text]


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_kind_is_redacted_and_counted(kind: str) -> None:
    secret = SECRETS[kind]
    text, counts = Redactor().redact(f"before {secret} after")
    assert counts == {kind: 1}
    assert f"[REDACTED:{kind}]" in text
    assert text.startswith("before ") and text.endswith(" after")
    assert not _survivors(secret, text)


def test_anthropic_key_is_not_named_an_openai_key() -> None:
    text, counts = Redactor().redact(SECRETS["anthropic_key"] + " and " + SECRETS["openai_key"])
    assert counts == {"anthropic_key": 1, "openai_key": 1}
    assert text == "[REDACTED:anthropic_key] and [REDACTED:openai_key]"


def test_authorization_header_keeps_its_words() -> None:
    text, counts = Redactor().redact("Authorization: bearer abcdef0123456789abcdef")
    assert text == "Authorization: bearer [REDACTED:bearer_token]"
    assert counts == {"bearer_token": 1}


def test_private_key_cut_before_its_end_is_redacted() -> None:
    # Tool output truncated mid-key: the header and the base64 body go, the rest stays.
    head = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nMIIEvQIB"
    assert Redactor().redact(head) == ("[REDACTED:private_key]", {"private_key": 1})
    text = f"log:\n{head}\n[output truncated at 4 KB]\nnext line"
    assert Redactor().redact(text) == (
        "log:\n[REDACTED:private_key]\n[output truncated at 4 KB]\nnext line",
        {"private_key": 1},
    )
    # A whole block before a cut one: each is replaced.
    out, counts = Redactor().redact(f"{PRIVATE_KEY}\nthen\n{head}")
    assert out == "[REDACTED:private_key]\nthen\n[REDACTED:private_key]"
    assert counts == {"private_key": 2}


@pytest.mark.parametrize(
    "text",
    [
        "APIKEYsk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789",
        "key:sk-svcacct-AbCdEfGhIjKlMnOpQrStUvWx0123456789",
        "TOKENsk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx0123",
    ],
)
def test_typed_keys_glued_to_a_word_are_found(text: str) -> None:
    out, counts = Redactor().redact(text)
    assert "AbCdEfGh" not in out and sum(counts.values()) == 1


@pytest.mark.parametrize(
    "text",
    [
        '{"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}',
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_access_key: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'",
    ],
)
def test_aws_secret_keys_are_found_by_their_name(text: str) -> None:
    out, counts = Redactor().redact(text)
    assert "wJalrXUtnFEMI" not in out and counts == {"aws_secret_key": 1}


@pytest.mark.parametrize(
    "text",
    [
        "see https://example.com:8080/path",
        "http://example.com/a:b@c",
        "mailto:ana@example.com",
        "a 40-char hash 0123456789abcdef0123456789abcdef01234567",
    ],
)
def test_lookalikes_are_left_alone(text: str) -> None:
    assert Redactor().redact(text) == (text, {})


def test_several_private_keys_are_each_replaced() -> None:
    text, counts = Redactor().redact(f"a\n{PRIVATE_KEY}\nb\n{PRIVATE_KEY}\nc")
    assert text == "a\n[REDACTED:private_key]\nb\n[REDACTED:private_key]\nc"
    assert counts == {"private_key": 2}


@pytest.mark.parametrize(
    "text",
    [
        "the bearer of bad news",
        "task-1234567890abcdefghijklmnop",  # "sk-" inside a word
        "risk-assessment-for-the-quarter-2024",
        "AKIA123",  # too short
        "eyJ alone",
        "ghp_short",
        "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor().redact(text) == (text, {})


def test_custom_patterns_are_counted_as_custom() -> None:
    redactor = Redactor([r"ACME-\d{6}", r"internal\.example\.org"])
    text, counts = redactor.redact("ticket ACME-123456 at internal.example.org, ACME-654321")
    assert text == "ticket [REDACTED:custom] at [REDACTED:custom], [REDACTED:custom]"
    assert counts == {"custom": 3}


@pytest.mark.parametrize("patterns", [["(unclosed"], ["a*"], ["x", ""], "sk-.*", [3]])
def test_bad_custom_patterns_raise_config_error(patterns) -> None:
    with pytest.raises(ConfigError) as info:
        Redactor(patterns)
    assert info.value.key == "redact_patterns"


def test_kinds_lists_every_builtin_kind_and_custom() -> None:
    assert set(SECRETS) | {"custom"} == set(KINDS)


# Filler that cannot form a secret of any kind on its own (no letters).
_FILLER = st.text(alphabet="0123456789 ,;:!\n", max_size=30)
# Bodies open with a letter, so filler (no letters) can never equal one.
_HEX = st.text(alphabet="0123456789abcdef", min_size=20, max_size=40).map(lambda h: "f" + h)
_PLANTED = st.one_of(
    _HEX.map(lambda h: ("openai_key", f"sk-{h}")),
    _HEX.map(lambda h: ("anthropic_key", f"sk-ant-{h}")),
    _HEX.map(lambda h: ("bearer_token", f"Bearer {h}")),
    _HEX.map(lambda h: ("github_token", f"ghs_{h}")),
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16).map(
        lambda s: ("aws_access_key", f"ASIA{s}")
    ),
    st.tuples(_HEX, _HEX, _HEX).map(lambda t: ("jwt", f"eyJ{t[0]}.{t[1]}.{t[2]}")),
    _HEX.map(lambda h: ("private_key", f"{PRIVATE_KEY[:32]}\n{h}\n{PRIVATE_KEY[-29:]}")),
    _HEX.map(lambda h: ("url_credentials", f"https://u:{h}@host")),
    st.text(
        alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+",
        min_size=40,
        max_size=40,
    ).map(lambda k: ("aws_secret_key", f"aws_secret_access_key={k}")),
)


@given(st.lists(st.tuples(_FILLER, _PLANTED), max_size=8), _FILLER)
def test_planted_secrets_never_survive(pieces, tail) -> None:
    text = " ".join(f"{filler} {secret}" for filler, (_, secret) in pieces) + f" {tail}"
    out, counts = Redactor().redact(text)
    expected: dict[str, int] = {}
    for _, (kind, secret) in pieces:
        expected[kind] = expected.get(kind, 0) + 1
        assert not _survivors(secret, out)
    assert counts == expected
    # Redacted text has nothing left to redact.
    assert Redactor().redact(out) == (out, {})


@pytest.mark.parametrize(
    "text",
    [
        "sk-" * 1_700_000,
        "-----BEGIN" * 500_000,
        "-----BEGIN RSA PRIVATE KEY-----\n" * 160_000,
        "eyJ" * 1_700_000,
        "eyJabcdef." * 500_000,
        "Bearer " * 700_000,
        "sk-ab " * 850_000,
        "ghp_" * 1_250_000,
        "sk-proj-" * 600_000,
        "sk-proj-ab " * 250_000,
        "a://b:" * 400_000,
        "https://user:" + "p" * 2_500_000,
        "secret_access_key=" * 140_000,
        "-----BEGIN PRIVATE KEY-----\n" + "QUJD\n" * 1_000_000,
    ],
    ids=[
        "sk",
        "begin",
        "begin-header",
        "eyJ",
        "jwt-ish",
        "bearer",
        "short-sk",
        "ghp",
        "sk-proj",
        "short-sk-proj",
        "url-ish",
        "url-long-password",
        "aws-name",
        "pem-cut",
    ],
)
def test_adversarial_inputs_stay_linear(text: str) -> None:
    # A sanity bound against catastrophic backtracking (quadratic here means minutes), not
    # a speed claim.
    start = time.perf_counter()
    Redactor().redact(text)
    assert time.perf_counter() - start < 2.0


def test_redaction_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        Redactor([r"x{3}"]).redact(" ".join(SECRETS.values()) + " xxx")
    assert caplog.records == []


class _RaisingItems(dict):  # type: ignore[type-arg]
    def items(self):  # type: ignore[no-untyped-def]
        raise RuntimeError("hostile items")


class _RaisingStr(str):
    def __str__(self) -> str:
        raise RuntimeError("hostile __str__")


class _Unreadable:
    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        raise RuntimeError("hostile __getattr__")


def test_redacted_value_reads_hostile_objects_as_stored() -> None:
    """A summarizer's units are the caller's own objects: a dict subclass whose items()
    raises reads as its stored pairs, a key whose __str__ raises as the text stored, and an
    object that cannot be read at all as its type name (an atheris finding)."""
    value = _RaisingItems({_RaisingStr("k"): "sk-" + "a" * 40, 10**5000: 1, "o": _Unreadable()})
    counts: dict[str, int] = {}
    out = redacted_value({"role": "tool", "content": [value]}, Redactor(), counts)
    part = out["content"][0]
    assert part["k"] != "sk-" + "a" * 40 and counts
    assert part["[int]"] == 1
    assert part["o"] == "[_Unreadable]"


# --- issue 36, finding 9: secrets behind JSON escapes, in rendered results, in cut keys ---

_AWS = "AKIAQ7K2LMPA9RSKD4YW"


@pytest.mark.parametrize(
    "escape", ["\\n", "\\t", "\\r", "\\b", "\\f", '\\"', "\\/", "\\\\", "\\u00e9", "\\u0041"]
)
@pytest.mark.parametrize(
    "secret",
    [
        _AWS,
        "sk-abcdefghijklmnopqrstuvwx",
        "sk-ant-abcdefghijklmnopqrstuvwx",
        "Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "github_pat_16C7e42F292c6912E7710c838347Ae178B4a",
        SECRETS["jwt"],
    ],
)
def test_a_json_escape_before_a_secret_separates_it_from_the_word_before(
    escape: str, secret: str
) -> None:
    out, counts = Redactor().redact(f"env{escape}{secret}{escape}more")
    assert counts and not _survivors(secret.removeprefix("Bearer "), out)


def test_the_issue_example_is_redacted() -> None:
    assert Redactor().redact("x\\nAKIAQ7K2LMPA9RSKD4YW") == (
        "x\\n[REDACTED:aws_access_key]",
        {"aws_access_key": 1},
    )


def test_an_escaped_tab_after_bearer_and_escaped_quotes_around_a_secret_name() -> None:
    out, counts = Redactor().redact(
        'Authorization: Bearer\\t9f8e7d6c5b4a3928 {\\"SecretAccessKey\\": '
        '\\"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\\"}'
    )
    assert counts == {"bearer_token": 1, "aws_secret_key": 1}
    assert "9f8e7d6c" not in out and "wJalrXUtnFEMI" not in out


@pytest.mark.parametrize("indent", ["", "  ", "\t"])
@pytest.mark.parametrize("newline", ["\n", "\r\n", "\\n", "\\r\\n"])
def test_a_cut_private_key_is_redacted_through_indented_or_escaped_lines(
    indent: str, newline: str
) -> None:
    lines = PRIVATE_KEY.splitlines()[:-1]  # cut before its END line
    text = "tool read: " + (newline + indent).join(lines) + "\n\nuser: next step"
    out, counts = Redactor().redact(text)
    assert counts == {"private_key": 1}
    assert all(line not in out for line in lines[1:])
    # The next message is not eaten with the key.
    assert out.endswith("\n\nuser: next step")


# Filler around a planted secret: letters too, since an escape is what separates them.
_AROUND = st.text(alphabet="abcdefxyzABCXYZ0123456789 .,:;-_", max_size=20)
# Characters that JSON writes as an escape (or, with ensure_ascii, as \u00XX) or as is.
_SEPARATORS = st.sampled_from(["\n", "\t", "\r", "\b", "\f", '"', "\\", "/", "é", " ", "\n  "])
_SESSION_SECRETS = st.sampled_from(
    [
        ("aws_access_key", _AWS),
        ("openai_key", "sk-Zq7abcdefghijklmnopqrstu"),
        ("anthropic_key", "sk-ant-Zq7abcdefghijklmnopqrstu"),
        ("bearer_token", "Bearer Zq7f8e7d6c5b4a3928"),
        ("github_token", "ghs_Zq7e42F292c6912E7710c838"),
        ("jwt", SECRETS["jwt"]),
        ("private_key", PRIVATE_KEY),
        ("private_key", PRIVATE_KEY.rsplit("\n", 1)[0]),  # cut before its END line
        ("url_credentials", "https://deploy:Zq7hunter2hunter2@ci.example.com"),
    ]
)
#: How the tool's output reaches the history: as text, as a JSON string the tool printed
#: (ASCII-only or not), that string encoded once more, or (Gemini, Bedrock) as the structured
#: result ringbound renders to JSON text itself.
_SHAPES = st.sampled_from(["text", "json", "json_ascii", "json_twice", "structured"])
_SUMMARY_PROVIDERS = [
    "openai_chat",
    "openai_responses",
    "anthropic",
    "gemini",
    "bedrock_converse",
]


def _secret_pieces(kind: str, secret: str) -> list[str]:
    """The parts of a planted secret that must not reach the summarizer."""
    if kind == "private_key":
        return [line for line in secret.splitlines() if "-----" not in line]
    if kind == "bearer_token":
        return [secret.removeprefix("Bearer ")]
    if kind == "url_credentials":
        return ["Zq7hunter2hunter2"]
    return [secret]


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def _summary_session(provider: str, result: object, shape: str) -> tuple[list, object]:
    """A long session whose oldest tool result is ``result``, in ``provider``'s format."""
    import json

    chat: list[dict] = [{"role": "user", "content": "Read the logs and fix the deploy."}]
    for i in range(24):
        chat += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "read_log", "arguments": json.dumps({"day": i})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"day {i}: " + "line " * 60},
        ]
    chat.append({"role": "user", "content": "What next?"})
    marker = "day 0: " + "line " * 60
    if provider == "openai_chat":
        chat[2]["content"] = result
        return chat, None
    native, system = from_canonical(provider, chat)

    def put(value: object) -> object:
        if isinstance(value, dict):
            if (
                shape == "structured"
                and provider == "bedrock_converse"
                and value == {"text": marker}
            ):
                return {"json": result}
            return {k: put(v) for k, v in value.items()}
        if isinstance(value, list):
            return [put(v) for v in value]
        if value == marker:
            return result
        return value

    return put(native), system


@pytest.mark.parametrize("provider", _SUMMARY_PROVIDERS)
@given(
    before=_AROUND,
    after=_AROUND,
    left=_SEPARATORS,
    right=_SEPARATORS,
    planted=_SESSION_SECRETS,
    shape=_SHAPES,
)
def test_a_planted_secret_never_reaches_the_summarizer(
    provider: str,
    before: str,
    after: str,
    left: str,
    right: str,
    planted: tuple[str, str],
    shape: str,
) -> None:
    import json

    import ringbound as rb

    kind, secret = planted
    output = f"env {before}{left}{secret}{right}{after} done"
    result: object = {
        "text": output,
        "json": json.dumps({"output": output}, ensure_ascii=False),
        "json_ascii": json.dumps({"output": output}),
        "json_twice": json.dumps(json.dumps({"output": output})),
        # Gemini renders {"output": ...} itself; Bedrock gets a json block.
        "structured": {"output": output},
    }[shape]
    if shape == "structured" and provider not in ("gemini", "bedrock_converse"):
        result = json.dumps({"output": output})
    if shape != "structured" and provider == "gemini":
        result = result  # Gemini's response object holds it under "output" either way
    messages, system = _summary_session(provider, result, shape)
    seen: list[rb.SummaryRequest] = []

    def summarizer(request: rb.SummaryRequest) -> str:
        seen.append(request)
        return "The agent read the logs."

    cfg = rb.AssemblyConfig(
        model_input_limit=3000, output_reserve_tokens=500, safety_margin_tokens=100
    )
    res = rb.Assembler(cfg, provider=provider, summarizer=summarizer).assemble(
        messages, system=system
    )
    assert seen, "the ring holding the secret was summarized"
    request = seen[0]
    texts = [request.text, *_strings(request.units)]
    for piece in _secret_pieces(kind, secret):
        assert not any(piece in t for t in texts), (piece, shape, left, right)
    assert res.report.summary is not None and res.report.summary.redactions.get(kind, 0) >= 1


@pytest.mark.parametrize(
    "text",
    [
        "\\nsk-" * 1_000_000,
        "\\u00e9eyJ" * 500_000,
        "\\nBearer " * 500_000,
        "\\nAKIA" * 800_000,
        "\\tghp_" * 800_000,
        "-----BEGIN PRIVATE KEY-----" + "\\nQUJD" * 1_000_000,
        "-----BEGIN PRIVATE KEY-----\n" + "  tool x" * 500_000,
        "-----BEGIN PRIVATE KEY-----\n" * 100_000 + "tool " * 500_000,
    ],
    ids=["sk", "eyJ", "bearer", "akia", "ghp", "pem-escaped", "pem-tool-line", "pem-many"],
)
def test_adversarial_escapes_stay_linear(text: str) -> None:
    start = time.perf_counter()
    Redactor().redact(text)
    assert time.perf_counter() - start < 2.0
