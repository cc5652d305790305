"""Start-up: building the tokenizer tables before the first request needs them.

A process builds each BPE table from the one vocabulary it ships on its first count (about 0.1
s for o200k_base), and the default backend's fast tables on a thread of its own after that
(1 to 3 s; counts are exact meanwhile, at the slower backend's speed). A long-running gateway
pays that once; a serverless function pays it on every cold start, inside
the first request's latency unless it warms up during initialization: call ``warmup()`` at
import time of the handler module, or set ``RINGBOUND_WARMUP`` and ringbound warms itself when
imported.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from . import _core
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
        wait: For the default ``bpe_openai`` backend, also wait for its fast tables, which
            are built on a thread of their own from one vocabulary (counts are exact
            meanwhile, at the ``tiktoken`` backend's speed). False returns once the first
            count can be made.

    Example:
        >>> import ringbound as rb
        >>> sorted(rb.warmup(["o200k_base"]))
        ['o200k_base']
    """
    if isinstance(encodings, str):
        encodings = [encodings]
    out: dict[str, float] = {}
    for encoding in encodings:
        if encoding not in ENCODINGS:
            raise ConfigError(
                f"warmup: encoding must be one of {', '.join(ENCODINGS)}, got {encoding!r}",
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
