"""Builtin multi-kernel apps: Python files with ``run(ctx, n)``."""
