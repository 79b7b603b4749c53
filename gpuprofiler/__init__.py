"""gpuprofiler: measure real kernel runs, calibrate a hardware profile, predict and validate.

The subpackages are the pipeline's stages, in order: ``device`` (backends), ``measure`` (the timing
engine and storage), ``workloads`` (kernel specs, apps), ``microbench`` and ``calibrate`` (the hardware
profile's measurements), ``profile`` (the profile file and its one typed view), ``models`` (every
predictor), ``validate``, ``report``, ``cli``. ARCHITECTURE.md at the top of the repository has the picture.

Importing the package is cheap: pyopencl and pycuda are imported only when a backend is opened.
"""

import importlib.util as _util
import sys as _sys
from pathlib import Path as _Path

__version__ = "0.1.0"


def _source_checkout_subpackages() -> None:
    """In a source checkout, ``microbench/`` and ``kernels/`` sit beside this package; installed, pyproject's
    package-dir puts them inside it. Register them under the installed names so both layouts import alike."""
    root = _Path(__file__).resolve().parent
    for name in ("microbench", "kernels"):
        init = root.parent / name / "__init__.py"
        full = f"{__name__}.{name}"
        if full in _sys.modules or (root / name).is_dir() or not init.is_file():
            continue
        spec = _util.spec_from_file_location(full, init, submodule_search_locations=[str(init.parent)])
        module = _util.module_from_spec(spec)
        _sys.modules[full] = module
        globals()[name] = module
        spec.loader.exec_module(module)


_source_checkout_subpackages()
