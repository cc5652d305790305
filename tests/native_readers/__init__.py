"""The providers' Python readers, kept as oracles for the core's reading."""
