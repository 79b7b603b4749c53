"""The hardware profile: the versioned JSON file of measured device figures (:mod:`.file`), the one typed
view every model reads (:mod:`.hardware`), and where a device's stored profile lives (:mod:`.locate`)."""

from gpuprofiler.profile.file import Profile, load_profile

__all__ = ["Profile", "load_profile"]
