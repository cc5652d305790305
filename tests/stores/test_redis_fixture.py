"""The Redis tests cannot pass by not running: without redis-server they fail, unless
``RINGBOUND_SKIP_REDIS=1`` asks explicitly for a skip."""

from __future__ import annotations

import pytest
import redis_server


def test_a_missing_redis_server_fails_unless_a_skip_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redis_server.shutil, "which", lambda name: None)
    monkeypatch.setattr(redis_server.os.path, "exists", lambda path: False)
    monkeypatch.delenv("RINGBOUND_SKIP_REDIS", raising=False)
    with pytest.raises(pytest.fail.Exception, match="need redis-server"):
        redis_server.need_redis()
    monkeypatch.setenv("RINGBOUND_SKIP_REDIS", "yes")  # only "1" means skip
    with pytest.raises(pytest.fail.Exception):
        redis_server.need_redis()
    monkeypatch.setenv("RINGBOUND_SKIP_REDIS", "1")
    with pytest.raises(pytest.skip.Exception, match="RINGBOUND_SKIP_REDIS=1"):
        redis_server.need_redis()
