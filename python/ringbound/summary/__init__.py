"""Summaries of dropped units: the request a summarizer receives, the runner that calls it,
the compaction stage that places the note, the bundled summarizers, redaction and recovery."""
