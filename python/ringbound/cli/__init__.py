"""The ``ringbound`` command: assemble, validate, count, bench, simulate, calibrate, demo."""
