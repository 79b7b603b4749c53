"""Fuzz the command line with mutated kernel specs, PTX files and hardware profiles; print the outcome table.

Each case is one ``gpuprofiler`` command run in a forked child of a process that has already imported the
package (a fresh interpreter per case would spend most of the run importing numpy), in its own empty directory,
under a memory cap and a time limit. The outcome is classified from the exit status and the output: a clean
exit (0, 2, 3), a Python traceback, a death by signal, a time-out, the memory cap; and a case "escaped" when a
file it was not asked to write appears (the payloads try to create ``PWNED``).

    python scripts/fuzz.py --specs 3000 --ptx 2000 --profiles 2000 --jobs 2 --out /tmp/fuzz
    python scripts/fuzz.py --specs 50 --ptx 50 --profiles 50            # a quick look

Cases are drawn from a seeded generator (``--seed``), so a run is reproducible; every case that is not clean is
kept under ``--out`` (its inputs, command, output) to become a regression test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
PTX = ROOT / "tests" / "fixtures" / "ptx"
PROFILES = ROOT / "tests" / "fixtures" / "profiles"
MEMORY_CAP = 4 << 30
PAYLOADS = ["__import__('os').system('touch PWNED')", "open('PWNED', 'w')", "().__class__.__base__",
            "exec('open(\"PWNED\",\"w\")')", "lambda: 0", "[x for x in (1,)]", "globals()", "n.__class__",
            "$(touch PWNED)", "`touch PWNED`"]
NASTY = [0, -1, 1, 2**31, 2**63, 2**64, -2**63, 1e308, float("nan"), float("inf"),
         -float("inf"), 0.5, -0.0, "", " ", "n", "n-1", "2*n", "n+1", "n/0", "1/3", "0**-1", "n*0", "-n",
         "9**9**9", "(-1)**0.5", "(((n**256)**256)**256)**256", "n**256", "2**63", "1e400", "nan", "inf",
         "1+" * 3000 + "1", "(" * 500 + "n" + ")" * 500, "-" * 3000 + "1", "n" * 100, "a" * 5000, "é",
         "\x00", "sqrt(-1)", "log2(0)", "exp(1000)", "max()", "min(n)", "ceil(n/0.0)", "floor(1e300)",
         [1, 2], [], ["n", "n"], ["n-1"], ["2*n"], ["n", "n", "n", "n"], {"a": 1}, {}, True, False,
         "float32", "int64", "complex128", "object", "-Xclang -load -Xclang /tmp/x.so", "-DX=1 -I/",
         "random", "zeros", "arange", "value", "n//3", "n%7"] + PAYLOADS


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def dump_toml(data: dict) -> str:
    """A small TOML writer for the spec shape: scalars, inline lists, tables and arrays of tables."""
    head, tail = [], []
    for k, v in data.items():
        key = json.dumps(k) if not k.replace("_", "").isalnum() else k
        if isinstance(v, dict):
            tail.append(f"\n[{key}]")
            tail += [f"{json.dumps(a)} = {toml_value(b)}" for a, b in v.items()]
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for item in v:
                tail.append(f"\n[[{key}]]")
                tail += [f"{json.dumps(a)} = {toml_value(b)}" for a, b in item.items()]
        else:
            head.append(f"{key} = {toml_value(v)}")
    return "\n".join(head + tail) + "\n"


def paths(obj, prefix=(), depth: int = 12):
    """Every (path, value) in a nested structure of dicts and lists, down to ``depth`` levels."""
    stack = [(prefix, obj)]
    while stack:
        path, value = stack.pop()
        yield path, value
        if len(path) >= depth:
            continue
        if isinstance(value, dict):
            stack += [(path + (k,), v) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(path + (i,), v) for i, v in enumerate(value)]


def set_at(obj, path, value):
    for p in path[:-1]:
        obj = obj[p]
    obj[path[-1]] = value


def del_at(obj, path):
    for p in path[:-1]:
        obj = obj[p]
    del obj[path[-1]]


def text_mutation(text: str, rng: random.Random) -> str:
    lines = text.splitlines()
    op = rng.randrange(7)
    if op == 0 and lines:
        del lines[rng.randrange(len(lines))]
    elif op == 1 and lines:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif op == 2:
        return text[: rng.randrange(len(text) + 1)]
    elif op == 3:
        i = rng.randrange(len(text) + 1)
        return text[:i] + rng.choice(["[", "]", "=", '"', "\n", "{", "#", "\\", "\x00", "é", "[[", "'''"]) + text[i:]
    elif op == 4 and len(lines) > 1:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif op == 5:
        i = rng.randrange(len(text) + 1)
        return text[:i] + "".join(chr(rng.randrange(1, 0x250)) for _ in range(rng.randrange(1, 8))) + text[i:]
    else:
        return "[a]\n" * rng.randrange(1, 3) + "x = " + "[" * rng.randrange(1, 3000)
    return "\n".join(lines) + "\n"


def spec_case(rng: random.Random, specs: list[Path]) -> tuple[dict[str, bytes], list[str]]:
    """A mutated builtin spec (its kernel sources beside it) and a command on it."""
    base = rng.choice(specs)
    text = base.read_text()
    data = tomllib.loads(text)
    files = {}
    for src in KERNELS.glob(base.stem + ".*"):
        if src.suffix != ".toml":
            files[src.name] = src.read_bytes()
    plausible = rng.random() < 0.35
    if plausible:  # one change a user could make by mistake, so that the kernel still compiles and launches
        arrays = [a for a in data.get("args", []) if "shape" in a]
        scalars = [a for a in data.get("args", []) if "value" in a and "shape" not in a]
        op = rng.randrange(5)
        if op < 2 and arrays:
            arr = rng.choice(arrays)
            shape = arr["shape"] if isinstance(arr["shape"], list) else [arr["shape"]]
            i = rng.randrange(len(shape))
            shape[i] = rng.choice([f"({shape[i]})-1", f"({shape[i]})/2", f"2*({shape[i]})", f"({shape[i]})+1", "1", "0"])
            arr["shape"] = shape
        elif op == 2 and isinstance(data.get("launch", {}).get("global"), list):
            g = data["launch"]["global"]
            i = rng.randrange(len(g))
            g[i] = rng.choice([f"2*({g[i]})", f"({g[i]})+256", f"({g[i]})*4", "1", f"({g[i]})-1"])
        elif op == 3 and scalars:
            rng.choice(scalars)["value"] = rng.choice(["0", "-1", "2*n", "n+1", "n*n", "1e30", "-n"])
        elif isinstance(data.get("params"), dict) and data["params"]:
            data["params"][rng.choice(list(data["params"]))] = rng.choice(["0", "1", "-1", "3", "1000", "n"])
        out = dump_toml(data)
    elif rng.random() < 0.25:
        out = text_mutation(text, rng)
    else:
        for _ in range(1 if rng.random() < 0.5 else rng.randrange(2, 4)):
            items = [(p, v) for p, v in paths(data) if p]
            path, value = rng.choice(items)
            op = rng.randrange(10)
            if op < 6:
                set_at(data, path, rng.choice(NASTY))
            elif op < 7 and isinstance(path[-1], str):
                del_at(data, path)
            elif op < 8:
                args = data.get("args")  # an earlier step may have replaced the list
                arrays = [a for a in args if isinstance(a, dict) and "shape" in a] if isinstance(args, list) else []
                if arrays:
                    rng.choice(arrays)["shape"] = rng.choice([["n-1"], "n-1", ["2*n"], "n/2", ["n", "2"], "1"])
            elif op < 9 and isinstance(data.setdefault("defines", {}), dict):  # an earlier step may have replaced it
                data["defines"][rng.choice(["X", "1X", "A B", "-Xclang", "N"])] = rng.choice(NASTY)
            elif isinstance(data.setdefault("params", {}), dict):
                data["params"][rng.choice(["m", "k", "huge"])] = rng.choice(NASTY)
        try:
            out = dump_toml(data)
        except TypeError:
            out = text
    files["spec.toml"] = out.encode("utf-8", "surrogatepass")
    own = tomllib.loads(text).get("small", [64])[0]  # the spec's own smallest size: valid and quick
    small = own if rng.random() < 0.7 else rng.choice([64, 256, 1024])
    command = rng.choice([
        ["measure", "spec.toml", "--sizes", str(small), "--budget", "0.05", "-o", "m.jsonl", "--device", "DEVICE"],
        ["maxplus", "spec.toml", "--size", str(small), "--profile", "PROFILE"],
        ["extrapolate", "spec.toml", "--small", f"{max(small // 4, 1)},{max(small // 2, 1)},{small}",
         "--target", str(small * 4), "--budget", "0.05", "-o", "m.jsonl", "--device", "DEVICE", "--profile",
         "PROFILE", "--no-extrap"],
    ])
    if plausible:
        command = ["measure", "spec.toml", "--sizes", str(small), "--budget", "0.05", "-o", "m.jsonl", "--device",
                   "DEVICE"]
    if command[0] == "measure" and rng.random() < 0.15:
        command += ["--set", f"{rng.choice(['n', 'm', 'k', 'x'])}={rng.choice([str(v) for v in NASTY])}"]
    return files, command


def ptx_case(rng: random.Random, ptxs: list[Path]) -> tuple[dict[str, bytes], list[str]]:
    base = rng.choice(ptxs)
    raw = bytearray(base.read_bytes())
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(8)
        text = raw.decode("utf-8", "replace")
        lines = text.splitlines()
        if op == 0 and raw:
            for _ in range(rng.randrange(1, 10)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            continue
        if op == 1:
            raw = raw[: rng.randrange(len(raw) + 1)]
            continue
        if op == 2 and lines:
            del lines[rng.randrange(len(lines))]
        elif op == 3 and lines:
            i = rng.randrange(len(lines))
            lines[i: i] = [lines[i]] * rng.randrange(1, 50)
        elif op == 4:
            import re
            nums = list(re.finditer(r"\d+", text))
            if nums:
                m = rng.choice(nums)
                big = rng.choice(["100000000", "0", "99999999999999999999999", "-1", "4294967296", "1e999"])
                text = text[: m.start()] + big + text[m.end():]
                lines = text.splitlines()
        elif op == 5:
            i = rng.randrange(len(lines) + 1) if lines else 0
            lines.insert(i, rng.choice([".reg .f32 %f<100000000>;", ".reg .b64 %rd<99999999999>;", "}", "{",
                                        "bra $L__BB0_1;", "$L__BB0_1:", "@%p1 bra $L__BB0_1;", ".shared .b8 s[999999999999];",
                                        "ld.global.f32 %f1, [%rd999999];", "mad.lo.s32 %r1, %r2, %r3;", ".entry x(",
                                        ".maxntid 0, 0, 0", "ret;", "\x00\x01\x02", "é" * 10]))
        elif op == 6 and lines:
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        else:
            lines = lines * rng.randrange(2, 4)
        raw = bytearray(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
    if rng.random() < 0.85:
        grid, block = rng.choice(["1024", "4096", "64,64", "16,16,4"]), rng.choice(["256", "128", "16,16", "8,8,4"])
    else:
        grid = rng.choice(["1024", "1", "0", "99999999999", "4,4,4", "1024,1024"])
        block = rng.choice(["256", "32", "1024", "0", "2048", "16,16"])
    return {"k.ptx": bytes(raw)}, ["pipeline", "k.ptx", "--grid", grid, "--block", block, "--profile", "PROFILE"]


def mutate_json(obj, rng: random.Random):
    items = [(p, v) for p, v in paths(obj) if p]
    if not items:
        return obj
    path, value = rng.choice(items)
    op = rng.randrange(8)
    if op == 0:
        del_at(obj, path) if isinstance(path[-1], str) or isinstance(path[-1], int) else None
    elif op == 1 and isinstance(value, (int, float)) and not isinstance(value, bool):
        set_at(obj, path, -value)
    elif op == 2:
        set_at(obj, path, rng.choice([float("nan"), float("inf"), 0, -1, 1e308, "x", None, [], {}, True, 10**30]))
    elif op == 3:
        deep = "x"
        for _ in range(rng.choice([10, 1000, 100000])):
            deep = [deep]
        set_at(obj, path, deep)
    elif op == 4:
        set_at(obj, path, rng.choice(PAYLOADS))
    elif op == 5 and isinstance(value, dict):
        value[rng.choice(["value", "unit", "interval", "points", "schema", "failed"])] = rng.choice(NASTY[:40])
    elif op == 6 and isinstance(value, list) and value:
        del value[rng.randrange(len(value))]
    else:
        set_at(obj, path, rng.choice(NASTY[:40]))
    return obj


def deep_json(depth: int) -> str:
    return "[" * depth + "]" * depth


def profile_case(rng: random.Random, profiles: list[Path]) -> tuple[dict[str, bytes], list[str]]:
    base = rng.choice(profiles)
    op = rng.randrange(10)
    if op == 0:
        raw = bytearray(base.read_bytes())
        for _ in range(rng.randrange(1, 20)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        data = bytes(raw)
    elif op == 1:
        raw = base.read_bytes()
        data = raw[: rng.randrange(len(raw) + 1)]
    elif op == 2:
        data = rng.choice([deep_json(100000).encode(), b'{"schema": ' + deep_json(50000).encode() + b"}", b"\xff\xfe",
                           b"", b"null", b"[]", b"1e999", b'{"schema": "gpuprofiler.profile"}'])
    else:
        obj = json.loads(base.read_text())
        for _ in range(rng.randrange(1, 4)):
            obj = mutate_json(obj, rng)
        try:
            data = json.dumps(obj).encode()
        except (ValueError, RecursionError):
            data = base.read_bytes()
    spec = rng.choice(["vadd", "matmul_naive", "spmv_csr", "reduction", "stencil5"])
    command = rng.choice([
        ["profile", "show", "p.json"],
        ["profile", "compare", "p.json", "PROFILE"],
        ["maxplus", spec, "--size", "4096", "--profile", "p.json"],
        ["pipeline", spec, "--size", "4096", "--profile", "p.json"],
        ["cache", spec, "--size", "4096", "--profile", "p.json"],
        ["extrapolate", spec, "--profile", "p.json", "--small", "256,512,1024", "--target", "4096",
         "--budget", "0.05", "-o", "m.jsonl", "--device", "DEVICE", "--no-extrap"],
    ])
    return {"p.json": data}, command


def child(command: list[str], workdir: Path, timeout: float) -> None:
    """Run one command in this (forked) process and exit with its status."""
    os.chdir(workdir)
    out = os.open(workdir / ".stdout", os.O_WRONLY | os.O_CREAT)
    err = os.open(workdir / ".stderr", os.O_WRONLY | os.O_CREAT)
    os.dup2(out, 1)
    os.dup2(err, 2)
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    from gpuprofiler.cli.main import main

    code = 1
    try:
        code = main(command)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except MemoryError:
        os.write(2, b"\nMEMORY-CAP\n")
        code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code if isinstance(code, int) else 1)


def run_case(command: list[str], files: dict[str, bytes], timeout: float, device: str, profile: Path) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="gpfuzz-"))
    for name, data in files.items():
        (workdir / name).write_bytes(data)
    command = [device if c == "DEVICE" else str(profile) if c == "PROFILE" else c for c in command]
    before = set(os.listdir(workdir))
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child(command, workdir, timeout)
    status = None
    while time.monotonic() - t0 < timeout:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
            break
        time.sleep(0.01)
    timed_out = status is None
    if timed_out:
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    out = (workdir / ".stdout").read_bytes().decode("utf-8", "replace") if (workdir / ".stdout").exists() else ""
    err = (workdir / ".stderr").read_bytes().decode("utf-8", "replace") if (workdir / ".stderr").exists() else ""
    created = sorted(set(os.listdir(workdir)) - before - {".stdout", ".stderr", "m.jsonl", "m.jsonl.lock"})
    escaped = (workdir / "PWNED").exists() or Path("/tmp/PWNED").exists()
    rec = {"command": command, "seconds": round(time.monotonic() - t0, 2), "escaped": escaped,
           "created": [c for c in created if not c.endswith((".png", ".tmp"))]}
    if timed_out:
        rec["outcome"] = "time-out"
    elif os.WIFSIGNALED(status):
        rec["outcome"] = f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    else:
        code = os.WEXITSTATUS(status)
        rec["exit"] = code
        if "MEMORY-CAP" in err:
            rec["outcome"] = "memory cap"
        elif "Traceback (most recent call last)" in err + out:
            rec["outcome"] = "traceback"
            rec["error"] = err.strip().splitlines()[-1] if err.strip() else ""
        elif code in (0, 2, 3):
            rec["outcome"] = f"exit {code}"
        else:
            rec["outcome"] = f"exit {code} (other)"
    rec["tail"] = err[-600:]
    rec["workdir"] = str(workdir)
    return rec


def make_case(kind: str, seed: str, specs: list[Path], ptxs: list[Path],
              profiles: list[Path]) -> tuple[dict[str, bytes], list[str]]:
    """The case of ``seed``: its files and command. A mutation the generator itself cannot follow (a bug of this
    script, not of the tool) is drawn again from a derived seed, so that it never ends the campaign."""
    for attempt in range(20):
        rng = random.Random(seed if attempt == 0 else f"{seed}:again{attempt}")
        try:
            if kind == "specs":
                return spec_case(rng, specs)
            if kind == "ptx":
                return ptx_case(rng, ptxs)
            return profile_case(rng, profiles)
        except Exception as exc:  # noqa: BLE001 - the generator's own failure
            print(f"fuzz: case {seed}: the generator failed ({type(exc).__name__}: {exc}); drawn again",
                  file=sys.stderr)
    raise RuntimeError(f"case {seed}: the generator failed 20 times")


def shard_main(args) -> None:
    """Run this shard's cases, one JSON line per case on stdout."""
    import gpuprofiler.cli.main  # noqa: F401  (imported once, before forking)
    import gpuprofiler.models.maxplus.predictor  # noqa: F401
    import gpuprofiler.workloads.spec  # noqa: F401

    specs = sorted(p for p in KERNELS.glob("*.toml"))
    ptxs = sorted(PTX.glob("*.ptx"))
    profiles = sorted(PROFILES.glob("*.json"))
    keep = Path(args.out)
    keep.mkdir(parents=True, exist_ok=True)
    kinds = ["specs"] * args.specs + ["ptx"] * args.ptx + ["profiles"] * args.profiles
    for index, kind in enumerate(kinds):
        if index % args.shards != args.shard:
            continue
        files, command = make_case(kind, f"{args.seed}:{kind}:{index}", specs, ptxs, profiles)
        rec = run_case(command, files, args.timeout, args.device, Path(args.profile))
        rec.update(kind=kind, index=index)
        clean = rec["outcome"].startswith("exit ") and "other" not in rec["outcome"] and not rec["escaped"]
        if clean:
            shutil.rmtree(rec["workdir"], ignore_errors=True)
        else:
            dest = keep / f"{kind}-{index}"
            shutil.rmtree(dest, ignore_errors=True)
            shutil.move(rec["workdir"], dest)
            (dest / "case.json").write_text(json.dumps(rec, indent=1))
            rec["workdir"] = str(dest)
        print(json.dumps(rec), flush=True)


def table(records: list[dict]) -> str:
    rows = ["| input | runs | exit 0 (ran) | exit 2/3 (refused cleanly) | tracebacks | killed by a signal | time-outs |"
            " memory cap | other exits | escapes |", "|---|---|---|---|---|---|---|---|---|---|"]
    names = {"specs": "mutated kernel specs (measure / extrapolate / maxplus)", "ptx": "mutated PTX (pipeline)",
             "profiles": "corrupted profiles (profile show / compare, maxplus, pipeline, cache, extrapolate)"}
    for kind in ("specs", "ptx", "profiles"):
        rs = [r for r in records if r["kind"] == kind]
        if not rs:
            continue
        count = lambda pred: sum(1 for r in rs if pred(r))  # noqa: E731
        tb = [r for r in rs if r["outcome"] == "traceback"]
        kinds = {}
        for r in tb:
            name = r.get("error", "").split(":")[0] or "?"
            kinds[name] = kinds.get(name, 0) + 1
        tb_text = str(len(tb)) + (" (" + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda x: -x[1]))
                                  + ")" if tb else "")
        rows.append(f"| {names[kind]} | {len(rs)} | {count(lambda r: r['outcome'] == 'exit 0')} | "
                    f"{count(lambda r: r['outcome'] in ('exit 2', 'exit 3'))} | {tb_text} | "
                    f"{count(lambda r: r['outcome'].startswith('signal'))} | "
                    f"{count(lambda r: r['outcome'] == 'time-out')} | {count(lambda r: r['outcome'] == 'memory cap')} | "
                    f"{count(lambda r: 'other' in r['outcome'])} | {count(lambda r: r['escaped'])} |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--specs", type=int, default=100)
    ap.add_argument("--ptx", type=int, default=100)
    ap.add_argument("--profiles", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", default="0")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--device", default="opencl:0:0", help="the PoCL device the spec cases measure on")
    ap.add_argument("--profile", default=str(PROFILES / "pocl.json"), help="a valid profile for the commands")
    ap.add_argument("--out", default="/tmp/gpfuzz", help="where the cases that are not clean are kept")
    ap.add_argument("--shard", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--shards", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.shard is not None:
        shard_main(args)
        return 0
    Path(args.out).mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    logs = [Path(args.out) / f"shard{i}.jsonl" for i in range(args.jobs)]
    procs = []
    for i, log in enumerate(logs):
        with log.open("w") as out:  # a file each: a pipe read one after the other would stall the later shards
            procs.append(subprocess.Popen([sys.executable, __file__, *sys.argv[1:], "--shard", str(i), "--shards",
                                           str(args.jobs)], stdout=out, text=True))
    for p in procs:
        p.wait()
    records = [json.loads(line) for log in logs for line in log.read_text().splitlines() if line.strip()]
    (Path(args.out) / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    print(f"gpuprofiler fuzz run, {started}, seed {args.seed}: `python scripts/fuzz.py {' '.join(sys.argv[1:])}`")
    print(table(records))
    bad = [r for r in records if not (r["outcome"] in ("exit 0", "exit 2", "exit 3") and not r["escaped"])]
    print(f"{len(bad)} case(s) not clean, kept under {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
