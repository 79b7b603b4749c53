"""Static PTX pipeline model (Zhang, Chen and Ming): PTX -> CFG and hot path -> task lists -> one-SM pipeline
simulation -> time.

Modules: :mod:`.ptx_source` (nvcc / NVRTC / .ptx input), :mod:`.ptx_parser`, :mod:`.values` (the per-thread
evaluator of launch-known values), :mod:`.cfg` (blocks, loops, trip counts, hot path), :mod:`.divergence`
(coalescing and bank conflicts), :mod:`.tasks` (unit classes and latencies), :mod:`.occupancy`,
:mod:`.simulator`, :mod:`.predict` (the whole model), :mod:`.specs` (kernel specs as launches) and
:mod:`.predictor` (the model behind the common predictor interface).
Nothing here imports pycuda or pyopencl.
"""
