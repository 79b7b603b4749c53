"""Prediction models, estimator-shaped: configure, ``fit`` on measurements (or a profile), ``predict`` sizes."""
