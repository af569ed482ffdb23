"""``ctrlz doctor``: what this machine offers ctrlz, one line each, and what ctrlz does without.

The facts are :mod:`ctrlz.platform`'s, plus the sandbox mechanism, which the sandbox package
answers itself (``ctrlz sandbox check`` says more). A fact that is missing is not an error:
every fast path has a portable twin, so the command exits 0; it is a report, for a bug report
or for the question "why is this slower on my Mac".
"""

from __future__ import annotations

from typing import Any

import click

from . import render


def _sandbox() -> dict[str, Any]:
    """The sandbox line: ``landlock``, ``bwrap`` or None (with why)."""
    from .. import platform

    fact: dict[str, Any] = {
        "key": "sandbox", "what": "sandbox for ctrlz run --sandbox", "value": None,
        "without": "ctrlz run --sandbox is refused; ctrlz run without it still protects"}
    if platform.portable():
        fact["reason"] = f"{platform.ENV}=portable"
        return fact
    try:
        from ..sandbox.probe import support
    except ImportError:  # pragma: no cover - a build without the sandbox package
        fact["reason"] = "no sandbox support in this build"
        return fact
    info = support()
    fact["value"] = info.auto
    if info.auto is None:
        fact["reason"] = info.reason
    return fact


def report() -> list[dict[str, Any]]:
    """Every fact, as ``--json`` prints it: key, what, value (None: not here), without."""
    from .. import platform

    facts = [f.to_json() for f in platform.facts()]
    facts.insert(len(facts) - 1, _sandbox())  # before the door, after the service
    return facts


@click.command("doctor")
@render.json_option
def doctor_cmd(as_json: bool) -> None:
    """Show what this machine offers ctrlz (atomic renames, whole-filesystem flush, direct
    I/O, copy-on-write clones, file watching, exec tracing, the sandbox, service
    registration, the native door), one line each, and what ctrlz does without each.
    CTRLZ_PLATFORM=portable turns the Linux-only ones off (the portable CI pass).

    \b
    Examples:
      ctrlz doctor
      ctrlz doctor --json
    """
    facts = report()
    if as_json:
        render.emit_json({"facts": facts})
        return
    width = max(len(f["key"]) for f in facts)
    for f in facts:
        if f["key"] == "system":
            render.out(f"{'system':<{width}}  {f['value']}")
            continue
        value = f["value"]
        line = f"{f['key']:<{width}}  {value if value is not None else 'no'}: {f['what']}"
        if value is None:
            why = f" ({f['reason']})" if f.get("reason") else ""
            line += f"{why}; without it, {f['without']}"
        render.out(line)


COMMANDS = [doctor_cmd]
