"""Finding kernel specs and apps: a path, or the name of a builtin one shipped in ``kernels/``."""

from __future__ import annotations

from pathlib import Path

import gpuprofiler.kernels
from gpuprofiler.errors import UserError


def kernels_dir() -> Path:
    """The builtin ``kernels/`` folder (``gpuprofiler.kernels``, installed or in a source checkout)."""
    return Path(gpuprofiler.kernels.__file__).parent


def builtin_specs() -> list[Path]:
    return sorted(kernels_dir().glob("*.toml"))


def builtin_extras() -> list[Path]:
    """Builtin specs kept out of the validation suite: the sparse ones, whose matrix is chosen per run
    (``kernels/sparse/``: SpMV on generated families, for ``tune``)."""
    return sorted((kernels_dir() / "sparse").glob("*.toml"))


# corpora shipped beside the builtin suite, run by name (``validate --suite blind``): test data never tuned on, and
# the foreign-style development kernels
CORPORA = ("blind", "foreign")


def corpus(name: str) -> Path:
    """The folder of a shipped corpus (:data:`CORPORA`)."""
    return kernels_dir() / name


def builtin_apps() -> list[Path]:
    return sorted(p for p in (kernels_dir() / "apps").glob("*.py") if not p.name.startswith("_"))


def builtin_extra_apps() -> list[Path]:
    """Builtin apps kept out of the validation suite: those that split their work over several devices
    (``kernels/multidevice/``, for ``simulate`` and sub-devices)."""
    return sorted(p for p in (kernels_dir() / "multidevice").glob("*.py") if not p.name.startswith("_"))


def resolve(target: str) -> Path:
    """A spec (.toml) or app (.py) path; a bare name or ``kernels/NAME.toml`` also finds the builtin one."""
    path = Path(target)
    if path.is_file():
        return path
    stem = path.stem
    for candidate in builtin_specs() + builtin_apps() + builtin_extras() + builtin_extra_apps():
        if candidate.stem == stem and (path.suffix in ("", candidate.suffix)):
            return candidate
    names = ", ".join(p.stem for p in builtin_specs() + builtin_apps() + builtin_extras() + builtin_extra_apps())
    raise UserError(f"no spec or app {target!r}: not a file, nor a builtin (builtins: {names})")


def portable(path: Path) -> tuple[str, str]:
    """How another machine finds ``path``: a builtin by its place in ``kernels/`` (wherever the package is
    installed there), else the file's absolute path (a shared file system)."""
    path = Path(path).absolute()  # symbolic links kept: an item's sources are found next to the link
    for base in (kernels_dir().absolute(), kernels_dir().resolve()):
        try:
            return ("builtin", path.relative_to(base).as_posix())
        except ValueError:
            continue
    return ("file", str(path))


def located(ref: tuple[str, str]) -> Path:
    """The path :func:`portable` described, on this machine (a UserError where it is not there)."""
    kind, where = ref
    path = kernels_dir() / where if kind == "builtin" else Path(where)
    if not path.is_file():
        raise UserError(f"{where}: not found on this machine (a spec or app outside the builtin kernels must be on "
                        f"a file system every worker shares)")
    return path
