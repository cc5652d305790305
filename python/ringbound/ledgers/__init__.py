"""The two ledgers: side effects already executed, and tokens (usage, tool returns)."""
