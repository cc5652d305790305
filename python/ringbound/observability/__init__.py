"""Metrics sinks and OpenTelemetry spans: counts and hashes, never message text."""
