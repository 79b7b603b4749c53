"""Measurement: the one timing engine (warm-up, adaptive sampling, hooks), its policies and statistics,
the record every measurement becomes, and the append-only store of records."""
