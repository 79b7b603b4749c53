"""Calibration: runs the microbenchmarks (:mod:`gpuprofiler.microbench`) on a device, section by section,
turns their raw curves into profile figures (cache levels from the latency curve's knees) and writes the
hardware profile."""
