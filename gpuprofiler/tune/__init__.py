"""Autotuning: a spec's parameters searched over a space, each configuration checked and timed on the device."""
