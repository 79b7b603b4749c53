"""Whole programs on an architecture (Pomelov's simulation): the architecture graph from hardware profiles, the
algorithm graph from a recorded run or a TOML file, discrete-event list scheduling, and timelines (Gantt charts,
Chrome trace-event JSON)."""
