"""Which profile a command uses: the one named with ``--profile``, else the device's stored one
(``results/<device-slug>/profile.json``, where ``gpuprofiler calibrate`` writes it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuprofiler.device.base import DeviceInfo
from gpuprofiler.measure.storage import default_path
from gpuprofiler.profile.file import Profile, load_profile, superseded


@dataclass
class ProfileChoice:
    """The profile a command will use (None: there is none), and a sentence saying which file or how to make one."""

    profile: Profile | None
    message: str
    given: bool = False

    @property
    def path(self) -> Path | None:
        return self.profile.path if self.profile is not None else None


def stored_profile_path(device: DeviceInfo) -> Path:
    """Where ``gpuprofiler calibrate`` stores the profile of ``device`` by default."""
    return default_path(device, "profile.json")


def how_to_make(device: DeviceInfo | None) -> str:
    if device is None:
        return "`gpuprofiler calibrate` writes one for the default device (or pass --profile FILE)"
    return (f"`gpuprofiler calibrate --device {device.id}` writes one to {stored_profile_path(device)} "
            "(or pass --profile FILE)")


def choose_profile(given: str | Path | None, device: DeviceInfo | None) -> ProfileChoice:
    """``--profile`` when given (a bad file is a UserError), else ``device``'s stored profile if there is one."""
    if given:
        profile = load_profile(given)
        return ProfileChoice(profile, f"profile {given}", given=True)
    if device is None:
        return ProfileChoice(None, f"no --profile given and no device to look one up for: {how_to_make(None)}")
    path = stored_profile_path(device)
    if not path.is_file():
        return ProfileChoice(None, f"no --profile given and no stored profile for {device.id} ({device.name}) at "
                                   f"{path}: {how_to_make(device)}")
    profile = load_profile(path)
    message = f"using the stored profile of {device.id} ({device.name}): {path}"
    stale = superseded(profile.data)
    if stale:
        message += (f" (calibrated {profile.data.get('created', '?')}; {len(stale)} of its figures were measured with "
                    f"methods since replaced: {', '.join(stale)}; `gpuprofiler calibrate --device {device.id}` "
                    f"measures them afresh)")
    return ProfileChoice(profile, message)
