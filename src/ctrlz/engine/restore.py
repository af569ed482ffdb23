"""Restoring a snapshot: safety snapshot, plan, apply, verify.

In place, the steps are always the same and in this order: take a ``safety`` snapshot of the
current state (so the restore itself can be undone), plan against it, apply, and verify every
path that was written or removed. ``dry_run`` plans against a scan that stores nothing and stops
there. Restoring into another directory needs no safety snapshot: the directory must be new or
empty, and nothing outside it is touched.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..state.exclude import Rules
from ..state.repository import Repository
from ..state.scan import Limits
from ..types import Skipped, Snapshot, show_path
from .apply import Applier, require_empty_destination, verify_applied
from .plan import Action, Planner, RestorePlan
from .snapshot import overlay_reader, scan_working, take_snapshot


@dataclass
class RestoreResult:
    target: Snapshot
    plan: RestorePlan
    safety: Snapshot | None = None
    applied: list[Action] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    dry_run: bool = False
    destination: str | None = None

    def to_json(self, strip_root: bool = True) -> dict[str, Any]:
        def p(path: bytes) -> str:
            return show_path(path.partition(b"/")[2] if strip_root else path)

        return {
            "target": self.target.id,
            "safety_snapshot": self.safety.id if self.safety else None,
            "dry_run": self.dry_run,
            "destination": self.destination,
            "counts": self.plan.counts(),
            "actions": [{**a.to_json(), "path": p(a.path)} for a in
                        (self.plan.actions if self.dry_run else self.applied)],
            "skipped": [{"path": p(s.path), "reason": s.reason} for s in self.skipped],
        }


def restore_snapshot(
    repo: Repository,
    roots: Sequence[Path],
    rules: Sequence[Rules],
    target: Snapshot,
    *,
    paths: Sequence[bytes] | None = None,
    to: Path | None = None,
    dry_run: bool = False,
    limits: Limits | None = None,
    safety_numbered: bool = True,
) -> RestoreResult:
    """Restore ``target`` in place (over ``roots``) or into the new directory ``to``.

    ``paths`` limits the restore to these virtual paths (``b"0/src/app.py"``) and what lies below
    them; each is restored or, if the snapshot says it was absent, deleted.
    """
    if to is not None:
        dest = os.fsencode(to)
        require_empty_destination(dest)
        dest_roots = [dest] if len(roots) == 1 else [dest + b"/" + str(i).encode()
                                                     for i in range(len(roots))]
        planner = Planner(target, repo.tree, repo.tree, repo.objects.read, [Path(os.fsdecode(d))
                          for d in dest_roots], paths, check_disk=False)
        plan = planner.run(None)
        result = RestoreResult(target, plan, dry_run=dry_run, destination=str(to),
                               skipped=list(plan.skipped))
        if dry_run:
            return result
        for d in dest_roots:
            os.makedirs(d, exist_ok=True)
        applied = Applier(plan, repo.objects, dest_roots).run()
        result.applied, result.skipped = applied.applied, result.skipped + applied.skipped
        verify_applied(repo.objects, dest_roots, applied.applied)
        return result

    dest_roots = [os.fsencode(r) for r in roots]
    with repo.lock:
        if dry_run:
            state = scan_working(repo, roots, rules, limits)
            reader, current, safety = overlay_reader(repo, state.trees), state.root, None
        else:
            safety, _ = take_snapshot(repo, roots, rules, type="safety", limits=limits,
                                      label=f"before restoring {target.id}",
                                      numbered=safety_numbered)
            reader, current = repo.tree, safety.root
        plan = Planner(target, repo.tree, reader, repo.objects.read, roots, paths,
                       check_disk=True).run(current)
        result = RestoreResult(target, plan, safety=safety, dry_run=dry_run,
                               skipped=list(plan.skipped))
        if dry_run:
            return result
        applied = Applier(plan, repo.objects, dest_roots).run()
        result.applied, result.skipped = applied.applied, result.skipped + applied.skipped
        verify_applied(repo.objects, dest_roots, applied.applied)
        # the workspace changed under the stat cache; entries it trusted are re-checked by stat
        return result
