"""Microbenchmark modules that calibrate a device's hardware profile.

Each module runs through :mod:`gpuprofiler.backends` on the real device and
returns measured values for :mod:`gpuprofiler.profile` (issue 3).
"""
