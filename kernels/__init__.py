"""Builtin kernel specs, sources and apps (installed as ``gpuprofiler.kernels``)."""
