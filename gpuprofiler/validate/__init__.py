"""Validation: every registered predictor on a suite of kernels and apps, its targets measured for real,
with resumable storage (:mod:`.suite`)."""
