"""Start-up: building the tokenizer tables before the first request needs them.

A fresh process counts from its first text with rank tables the extension carries laid out, so
nothing has to be warmed for ordinary text. The default backend's encoder tables, which count
long pieces (a line of a script without spaces, a long encoded blob) in linear time, are built
on a thread of their own when the first such piece comes (about a second; counts are exact
meanwhile). A serverless function that expects such pieces in its first request can build them
during initialization: call ``warmup()`` at import time of the handler module, or set
``RINGBOUND_WARMUP`` and ringbound warms itself when imported.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from . import _core
from .caller_values import plain_iterable, plain_str, shown
from .errors import ConfigError

__all__ = ["ENCODINGS", "WARMUP_ENV", "warmup", "warmup_from_env"]

ENCODINGS = ("o200k_base", "cl100k_base")
#: ``1``/``true``/``all`` warms every encoding at import; a comma-separated list of encodings
#: warms those; empty, ``0`` or ``false`` does nothing.
WARMUP_ENV = "RINGBOUND_WARMUP"


def warmup(
    encodings: Iterable[str] = ENCODINGS,
    *,
    tokenizer_backend: str | None = None,
    wait: bool = True,
) -> dict[str, float]:
    """Builds the tables of each encoding now, and returns the seconds each took (close to 0
    for a table already built).

    Args:
        encodings: ``o200k_base`` and/or ``cl100k_base``.
        tokenizer_backend: The backend to warm (None: the default one, which the Assembler
            uses unless ``tokenizer_backend`` is configured).
        wait: For the default ``bpe_openai`` backend, also build its encoder's tables (for
            long pieces; otherwise built on a thread of their own when the first long piece
            comes, counts being exact meanwhile) and wait for them. False returns once the
            first count has been made.

    Example:
        >>> import ringbound as rb
        >>> sorted(rb.warmup(["o200k_base"]))
        ['o200k_base']
    """
    names = [encodings] if isinstance(encodings, str) else plain_iterable(encodings)
    if names is None:
        raise ConfigError(
            f"warmup: encodings must be an iterable of names, got {type(encodings).__name__}",
            key="encodings",
            reason="not a list",
        )
    out: dict[str, float] = {}
    for given in names:
        encoding = plain_str(given)
        if encoding not in ENCODINGS:
            raise ConfigError(
                f"warmup: encoding must be one of {', '.join(ENCODINGS)}, got {shown(given)}",
                key="encoding",
                reason="unknown encoding",
            )
        start = time.perf_counter()
        # Text with the shapes that reach every table: letters, digits, punctuation,
        # whitespace runs and non-ASCII.
        _core.count_text("Warm up: 12,345 tokens — déjà vu!\n\t  ok", encoding, tokenizer_backend)
        if wait and tokenizer_backend in (None, "bpe_openai"):
            _core.wait_for_tables(encoding)
        out[encoding] = time.perf_counter() - start
    return out


def warmup_from_env() -> None:
    """Warms up as ``RINGBOUND_WARMUP`` says (called when ringbound is imported)."""
    value = os.environ.get(WARMUP_ENV, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return
    if value in ("1", "true", "yes", "on", "all"):
        warmup()
        return
    warmup([v.strip() for v in value.split(",") if v.strip()])
