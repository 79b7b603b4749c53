"""What gets measured: kernel specs (TOML, expressions through a safe evaluator, numpy reference checks),
multi-kernel apps run through a recording wrapper, the builtin ones, and sweeps over sizes."""
