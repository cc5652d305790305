"""Redaction: every builtin kind is caught and counted, the caller's patterns too, ordinary
text is left alone, and adversarial inputs stay linear."""

from __future__ import annotations

import logging
import time

import pytest
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
