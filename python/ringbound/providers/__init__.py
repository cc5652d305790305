"""Provider adapters: how each wire format's insertions (synthesized results, the ledger note)
are written back in that format."""

from __future__ import annotations

__all__ = ["PROVIDERS", "check_provider"]

from ..errors import ConfigError

#: Provider keys this release speaks.
PROVIDERS = ("openai_chat",)


def check_provider(provider: str) -> str:
    """Returns ``provider`` if supported, else raises ConfigError naming the supported ones."""
    if provider not in PROVIDERS:
        raise ConfigError(
            f"provider {provider!r} is not supported; supported: {', '.join(PROVIDERS)}",
            key="provider",
            reason=f"must be one of {', '.join(PROVIDERS)}",
        )
    return provider
