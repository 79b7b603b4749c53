"""gpuprofiler: measure real kernel runs, calibrate a hardware profile, predict and validate.

Importing the package is cheap: pyopencl and pycuda are imported only when a
backend is opened.
"""

__version__ = "0.1.0"
