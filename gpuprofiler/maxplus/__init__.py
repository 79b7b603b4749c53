"""The max-plus model of a kernel (Antonyuk & Mikheev 2022): algebra, kernel graphs, the four models,
the graph builder for real kernel sources, and the ``maxplus`` command."""
