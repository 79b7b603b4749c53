"""A spec's sources and the files they include are read only from the spec's folder (the builtin kernels' too, and
folders the user names in $GPUPROFILER_SOURCE_DIRS): a path out of it, a link leading out, a file that is no
regular file, an include nested without end: refused naming the path and the variable, before anything compiles."""

import os
import shutil

import pytest
from conftest import KERNELS, pocl_id, run_cli

from gpuprofiler.errors import UserError
from gpuprofiler.kernelcode.source import INCLUDE_DEPTH, preprocess
from gpuprofiler.textfile import SOURCE_DIRS
from gpuprofiler.workloads.spec import load_spec


def spec_in(folder, source: str):
    """vadd's spec in ``folder``, its OpenCL source ``source`` (its CUDA one left out)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = (KERNELS / "vadd.toml").read_text().replace('cuda = "vadd.cu"\n', "")
    path = folder / "vadd.toml"
    path.write_text(text.replace('opencl = "vadd.cl"', f'opencl = "{source}"', 1))
    return path


def test_a_source_outside_the_specs_folder_is_refused_unless_allowed(tmp_path, monkeypatch):
    monkeypatch.delenv(SOURCE_DIRS, raising=False)
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(KERNELS / "vadd.cl", tmp_path / "elsewhere" / "vadd.cl")
    spec = spec_in(tmp_path / "specs", "../elsewhere/vadd.cl")
    with pytest.raises(UserError, match=rf"source\.opencl: .*elsewhere/vadd\.cl \(it leads to .*\) lies outside .*specs.*\${SOURCE_DIRS}"):
        load_spec(spec)
    monkeypatch.setenv(SOURCE_DIRS, str(tmp_path / "elsewhere"))
    assert load_spec(spec).sources["opencl"].name == "vadd.cl"
    monkeypatch.delenv(SOURCE_DIRS)
    for outside in ("/etc/passwd", "../../../../../../../../../../etc/passwd"):  # the audit's
        with pytest.raises(UserError, match="etc/passwd.* lies outside"):
            load_spec(spec_in(tmp_path / "specs", outside))


def test_a_link_leading_out_of_the_folder_and_a_fifo_are_refused(tmp_path):
    shutil.copy(KERNELS / "vadd.cl", tmp_path / "outside.cl")
    spec = spec_in(tmp_path / "specs", "linked.cl")
    (tmp_path / "specs" / "linked.cl").symlink_to(tmp_path / "outside.cl")
    with pytest.raises(UserError, match=r"linked\.cl \(it leads to .*outside\.cl\) lies outside"):
        load_spec(spec)
    shutil.copy(KERNELS / "vadd.cl", tmp_path / "specs" / "inside.cl")
    (tmp_path / "specs" / "linked_in.cl").symlink_to(tmp_path / "specs" / "inside.cl")
    assert load_spec(spec_in(tmp_path / "specs", "linked_in.cl")).kernel == "vadd"  # a link inside is fine
    os.mkfifo(tmp_path / "specs" / "fifo.cl")
    with pytest.raises(UserError, match="fifo.cl is not a regular file"):
        load_spec(spec_in(tmp_path / "specs", "fifo.cl"))


def test_includes_are_confined_to_the_sources_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(SOURCE_DIRS, raising=False)
    (tmp_path / "k" / "inc").mkdir(parents=True)
    (tmp_path / "k" / "inc" / "n.h").write_text("#define N 3\n")
    main = tmp_path / "k" / "main.cl"
    assert "int x = 3;" in preprocess('#include "inc/n.h"\nint x = N;\n', str(main), {})
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "m.h").write_text("#define M 4\n")
    for text in ('#include "/etc/hostname"\n', '#include "/dev/zero"\n', '#include "../other/m.h"\n'):
        with pytest.raises(UserError, match=rf"#include .*lies outside .*\${SOURCE_DIRS}"):
            preprocess(text, str(main), {})
    monkeypatch.setenv(SOURCE_DIRS, str(tmp_path / "other"))
    assert "int y = 4;" in preprocess('#include "../other/m.h"\nint y = M;\n', str(main), {})
    (tmp_path / "k" / "self.h").write_text('#include "self.h"\n')
    with pytest.raises(UserError, match=f"more than {INCLUDE_DEPTH} deep"):
        preprocess('#include "self.h"\n', str(main), {})
    os.mkfifo(tmp_path / "k" / "pipe.h")
    with pytest.raises(UserError, match="pipe.h is not a regular file"):
        preprocess('#include "pipe.h"\n', str(main), {})


@pytest.mark.pocl
def test_measure_refuses_a_kernel_including_a_file_outside_its_folder(tmp_path):
    """Exit 2 naming the include and the variable, no traceback, nothing measured: the bounds check's preprocessor
    runs before the kernel compiles, so the compiler never reads the file."""
    if pocl_id() is None:
        pytest.fail("the PoCL device is missing: pip install pocl-binary-distribution")
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "evil.cl").write_text('#include "/etc/hostname"\n' + (KERNELS / "vadd.cl").read_text())
    spec = spec_in(tmp_path / "k", "evil.cl")
    r = run_cli("measure", spec, "--sizes", "4096", "--budget", "0.05", "-o", tmp_path / "m.jsonl",
                "--device", pocl_id())
    assert r.returncode == 2, r.stderr
    assert "#include /etc/hostname" in r.stderr and SOURCE_DIRS in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "m.jsonl").exists() or not (tmp_path / "m.jsonl").read_text().strip()


# the timer's stop can land in a callback that swallows it (the garbage collector's, which hypothesis hooks): it is
# raised again a tenth of a second later, until it stops the preprocessor; the swallowed one is reported as unraisable
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_macro_that_expands_without_end_is_stopped_in_time(tmp_path, monkeypatch):
    """Fifteen chained defines, each three copies of the one before (3^15 tokens): stopped past the preprocessor's
    time limit (lowered here to half a second) with a message, the timer and the signal handler given back; a
    doubling chain of the same length (2^15) still preprocesses."""
    import signal
    import time

    import gpuprofiler.kernelcode.source as source

    monkeypatch.setattr(source, "PREPROCESS_S", 0.5)
    bomb = "\n".join(["#define M0 x"] + [f"#define M{i} M{i - 1} M{i - 1} M{i - 1}" for i in range(1, 16)]
                     + ["int y = M15;"]) + "\n"
    before = signal.getsignal(signal.SIGALRM)
    t0 = time.monotonic()
    with pytest.raises(UserError, match="the preprocessor ran past 0.5 s"):
        preprocess(bomb, str(tmp_path / "bomb.cl"), {})
    assert time.monotonic() - t0 < 5
    assert signal.getsignal(signal.SIGALRM) is before and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    def handler(*_):
        pass

    mine = signal.signal(signal.SIGALRM, handler)  # a timer of the caller's own is given back
    signal.setitimer(signal.ITIMER_REAL, 100.0)
    try:
        with pytest.raises(UserError, match="ran past"):
            preprocess(bomb, str(tmp_path / "bomb.cl"), {})
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 95.0 < left <= 100.0 and signal.getsignal(signal.SIGALRM) is handler
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, mine)
    monkeypatch.setattr(source, "PREPROCESS_S", 30.0)
    fine = "\n".join(["#define M0 x"] + [f"#define M{i} M{i - 1} M{i - 1}" for i in range(1, 13)]
                     + ["int y = M12;"]) + "\n"
    assert preprocess(fine, str(tmp_path / "fine.cl"), {}).split("int y =")[1].count("x") == 2 ** 12
