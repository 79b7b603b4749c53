"""The ``gpuprofiler`` command line: one module per command, shared options in :mod:`.common`."""

from gpuprofiler.cli.main import main

__all__ = ["main"]
