"""Fractal extrapolation from small-size sweeps (Escobar & Boppana) and the laws past it: the scaling laws
(:mod:`.laws`), the per-phase fit of a sweep (:mod:`.extrapolate`), regime boundaries read from the profile
(:mod:`.regimes`), Extra-P's input format and baseline (:mod:`.extrap`) and the predictor (:mod:`.predictor`)."""
