"""Which service manager keeps the service running here: systemd (a user unit) or launchd (an
agent), as :mod:`ctrlz.platform` answers. Both modules have the same functions (``available``,
``install``, ``uninstall``, ``installed``, ``active``, ``start``, ``stop``, ``unit_path``,
``unit_text``, ``manual_steps``), so ``ctrlz service`` asks this one and never the platform."""

from __future__ import annotations

from types import ModuleType


def manager() -> ModuleType:
    """:mod:`.launchd` where launchd is the init system, else :mod:`.systemd` (whose
    ``available`` says why not where there is no user systemd either)."""
    from .. import platform

    if platform.service_manager() == "launchd":
        from . import launchd

        return launchd
    from . import systemd

    return systemd
