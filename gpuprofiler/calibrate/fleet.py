"""Calibration through a runner: each device's profile section by section, one task per section on that device,
the profile saved here after each one. Many devices calibrate at once, each alone on its device.

``calibrate --cluster ... --all-devices`` writes one profile per device, ``DIR/<device-slug>/<host>/profile.json``
(``<host>-<device>`` where a host holds several devices of one kind); a rerun skips complete profiles and finishes
partial ones. A device whose section fails keeps the sections before it (its ``failure``: the section, the stage and
the reason) while the others go on.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuprofiler.calibrate.driver import SECTIONS, calibrate, missing_sections
from gpuprofiler.errors import DeviceError, ItemFailure, UserError
from gpuprofiler.measure.runners.base import Runner, Slot, Task, TaskFailed
from gpuprofiler.measure.storage import command_line
from gpuprofiler.profile.file import Profile, load_profile


def section_task(ctx, section: str, quick: bool, data: dict | None) -> dict:
    """A runner's task: one calibration section measured on the task's device, into the profile so far (``data``;
    None for the first); the profile after it."""
    resume = Profile(dict(data)) if data else None
    with tempfile.TemporaryDirectory(prefix="gpuprofiler-calibrate-") as tmp:
        return calibrate(ctx.backend(), Path(tmp) / "profile.json", quick=quick, only=(section,), resume=resume).data


@dataclass
class DeviceRun:
    """One device's calibration: where its profile goes, the sections still to measure, the profile so far."""

    slot: Slot
    path: Path
    todo: list[str]
    data: dict | None = None
    seconds: float = 0.0
    error: str | None = None
    sections: list[str] = field(default_factory=list)
    failure: ItemFailure | None = None  # the section that failed, its stage and reason

    def task(self, quick: bool, section_fn: Callable) -> Task:
        section = self.todo[0]
        return Task(f"calibrate:{self.slot.name}:{section}", section_fn, (section, quick, self.data), slot=self.slot,
                    label=f"{self.slot.name} {section}")


def profile_path(outdir: Path, slot: Slot, slots: list[Slot]) -> Path:
    """Where a fleet calibration writes ``slot``'s profile: ``outdir/<slug>/<host>/profile.json``, the device's
    resource added to the host where the host holds several devices of its kind."""
    alike = [s for s in slots if s.kind == slot.kind and s.host == slot.host]
    place = slot.host if len(alike) == 1 else f"{slot.host}-{slot.resource}"
    return Path(outdir) / slot.kind / re.sub(r"[^A-Za-z0-9._@-]+", "-", place) / "profile.json"


def plan(slot: Slot, path: Path, only: tuple[str, ...], resume: bool = True) -> DeviceRun:
    """A device's calibration: every section of ``only``; with ``resume`` and a profile of that device at
    ``path``, only the sections it lacks."""
    if resume and path.exists():
        profile = load_profile(path)
        described = (profile.data.get("device") or {}).get("name")
        if described != slot.info.get("name"):
            raise UserError(f"{path} is a profile of {described}, not of {slot.info.get('name')} ({slot.name}): "
                            f"move it, or calibrate into another folder")
        done = set(profile.data.get("sections_done") or [])
        todo = [s for s in SECTIONS if s in only and s not in done]
        return DeviceRun(slot, path, todo, profile.data)
    return DeviceRun(slot, path, [s for s in SECTIONS if s in only])


def run_calibrations(runner: Runner, runs: list[DeviceRun], quick: bool = False,
                     say: Callable[[str], None] = lambda m: None,
                     section_fn: Callable[..., dict] | None = None) -> list[DeviceRun]:
    """Each run's sections through ``runner``, one task per section, the next submitted when one ends; the profile
    saved after each (the command and the order of sections as this run asked, the host where it was measured).
    A device whose task fails (its worker died each try) keeps what it had and the others go on. ``section_fn``: the
    task's function (default :func:`section_task`)."""
    section_fn = section_fn or section_task
    command = command_line()
    planned = {id(r): list(r.todo) for r in runs}
    by_key: dict[str, DeviceRun] = {}

    def submit(r: DeviceRun) -> Task:
        task = r.task(quick, section_fn)
        by_key[task.key] = r
        return task

    def done(task: Task, outcome) -> list[Task]:
        r = by_key.pop(task.key)
        section = r.todo.pop(0)
        data = dict(outcome.value)
        if r.data is None:  # the first section of a new profile: what the whole run set out to measure
            data["sections"] = planned[id(r)]
            data["command"] = command
            data["host"] = r.slot.host
            data.pop("resumed", None)
        else:
            data["resumed"] = list((r.data or {}).get("resumed") or [])
            data["sections"] = list(dict.fromkeys(list(r.data.get("sections") or []) + planned[id(r)]))
        data["complete"] = not missing_sections(data)
        r.data = data
        r.seconds += outcome.seconds
        r.sections.append(section)
        Profile(data).save(r.path)
        say(f"{r.slot.name}: {section} done in {outcome.seconds:.1f} s ({len(r.todo)} section(s) left)")
        return [submit(r)] if r.todo else []

    def failed(failure: TaskFailed) -> None:
        r = by_key.pop(failure.task.key)
        r.error = str(failure.error)
        r.failure = ItemFailure.of(r.todo[0] if r.todo else "?", failure.error, r.slot.name)
        say(f"{r.slot.name}: {r.failure.item} failed ({r.failure.stage}): {failure.error}")

    runner.run([submit(r) for r in runs if r.todo], done, failed)
    return runs


def calibrate_slot(runner: Runner, slot: Slot, path: Path, quick: bool = False, only: tuple[str, ...] = SECTIONS,
                   resume: Profile | None = None, say: Callable[[str], None] = lambda m: None) -> Profile:
    """One device of a runner calibrated into ``path`` (``resume``: a partial profile of it to complete)."""
    data = dict(resume.data) if resume is not None else None
    done = set((data or {}).get("sections_done") or [])
    run = DeviceRun(slot, Path(path), [s for s in SECTIONS if s in only and s not in done], data)
    [run] = run_calibrations(runner, [run], quick, say)
    if run.error:
        raise DeviceError(f"calibrating {slot.name} failed: {run.error}")
    return load_profile(path)


def summary_rows(runs: list[DeviceRun]) -> list[dict[str, Any]]:
    return [{"device": r.slot.name, "kind": r.slot.kind, "profile": str(r.path),
             "sections": ",".join(r.sections) or "-", "seconds": r.seconds,
             "status": "failed" if r.error else "complete" if not r.todo else "partial",
             "stage": r.failure.stage if r.failure else "", "error": r.error or ""} for r in runs]


def failures(runs: list[DeviceRun]) -> list[ItemFailure]:
    """Each device that did not finish: the section it stopped at, the stage and the reason."""
    return [r.failure or ItemFailure(r.todo[0], "error", "not finished (no device of the cluster ran it)", r.slot.name)
            for r in runs if r.failure or r.todo]
