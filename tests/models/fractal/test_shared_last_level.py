"""The cache-miss law's shared last level: which capacity the small sizes saw (this VM's L3 share moves)."""

import pytest

from gpuprofiler.models.fractal.laws import CacheMissLaw


class _SharedLast:
    """A gathered vector of 4n bytes: misses a last level of capacity c once 4n > c, 1e-7 s for each 16 elements."""

    capacities = (1e6, 2e6, 4e6)

    def __call__(self, n):
        return self.memory_s(n, self.capacities[0])

    def memory_s(self, n, capacity=None):
        c = self.capacities[0] if capacity is None else capacity
        return 1e-7 * n / 16 if 4 * n > c else 0.0


@pytest.mark.parametrize("seen,expected", [(None, 4e6), (1e6, 1e6), (2e6, 2e6)])
def test_the_cache_miss_law_keeps_the_last_level_capacity_the_small_sizes_saw(seen, expected):
    """Work 1e-9 n; the small sizes 100k .. 700k (0.4 .. 2.8 MB) were timed with a last level of ``seen`` bytes
    (None: all hits); the law keeps the candidate that predicts them left out best, the largest where none is
    better (the fastest runs' share), and predicts the target at 8M (32 MB, past every candidate) memory-bound."""
    mem = _SharedLast()
    sizes = [100_000, 200_000, 300_000, 400_000, 500_000, 600_000, 700_000]
    times = [max(1e-9 * n, mem.memory_s(n, seen) if seen else 0.0) for n in sizes]
    law = CacheMissLaw(lambda n: float(n), mem).fit(sizes, [[t] * 5 for t in times])
    assert law.capacity_ == expected
    assert law.predict_value(8_000_000) == pytest.approx(1e-7 * 8_000_000 / 16, rel=1e-6)
