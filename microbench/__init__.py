"""Microbenchmarks that measure a device for its hardware profile (installed as ``gpuprofiler.microbench``).

Each module runs through :mod:`gpuprofiler.device` backends on the real device, times through the one
engine (:mod:`gpuprofiler.measure.engine`), and returns profile entries
(:func:`gpuprofiler.profile.file.entry`); :mod:`gpuprofiler.calibrate` runs them section by section.
A new microbenchmark is a module here with ``measure(backend, quick, progress, ...)`` and a section in
:mod:`gpuprofiler.calibrate.driver`.
"""
