"""gpuprofiler: measure real kernel runs, calibrate a hardware profile, predict and validate.

The subpackages are the pipeline's stages, in order: ``device`` (backends), ``measure`` (the timing
engine and storage), ``workloads`` (kernel specs, apps), ``profile`` (the profile file and its one typed
view), ``microbench`` and ``calibrate`` (the profile's measurements), ``models`` (every predictor),
``validate``, ``report``, ``cli``. ARCHITECTURE.md at the top of the repository has the picture.

Importing the package is cheap: pyopencl and pycuda are imported only when a backend is opened.
"""

import importlib.abc as _abc
import importlib.util as _util
import sys as _sys
from pathlib import Path as _Path

__version__ = "0.1.0"


class _SourceCheckout(_abc.MetaPathFinder):
    """In a source checkout, ``microbench/`` and ``kernels/`` sit beside this package; installed, pyproject's
    package-dir puts them inside it. This finder, installed only in a checkout, gives them the installed
    names when they are first imported, so both layouts import alike."""

    def __init__(self, root: _Path):
        self.places = {f"{__name__}.{name}": root / name for name in ("microbench", "kernels")}

    def find_spec(self, fullname, path=None, target=None):
        folder = self.places.get(fullname)
        if folder is None:
            return None
        return _util.spec_from_file_location(fullname, folder / "__init__.py",
                                             submodule_search_locations=[str(folder)])


_here = _Path(__file__).resolve().parent
if not (_here / "microbench").is_dir() and (_here.parent / "microbench" / "__init__.py").is_file():
    _sys.meta_path.append(_SourceCheckout(_here.parent))
