"""Commands for remotes: remote add/list/remove/forget, push, pull, clone.

Each one parses, calls :mod:`ctrlz.session.remotes.remotes` and renders; boto3 and cryptography are
imported only when a command actually talks to a remote.
"""

from __future__ import annotations

from typing import Any

import click

from . import render
from .context import CONTEXT, State, pass_state


def _origin_text(e: dict[str, Any]) -> list[str]:
    o = e.get("origin") or {}
    return [o.get("machine") or "-", o.get("user") or "-", o.get("agent") or "-",
            (o.get("session") or "-")[:14]]


@click.group("remote", context_settings=CONTEXT)
def remote_group() -> None:
    """Manage this workspace's remotes (S3-compatible buckets, or file:// directories).

    Credentials are never stored by ctrlz: they come from the standard AWS chain
    (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ~/.aws/credentials and config,
    AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_S3).

    \b
    Examples:
      ctrlz remote add origin s3://team-bucket/ctrlz
      ctrlz remote add r2 s3://snaps/app --endpoint-url https://ACCOUNT.r2.cloudflarestorage.com
      ctrlz remote add nas file:///mnt/nas/ctrlz --encrypt --key-file ~/.ctrlz.key
      ctrlz remote list
    """


@remote_group.command("add")
@click.argument("name")
@click.argument("url")
@click.option("--endpoint-url", metavar="URL", help="A non-AWS S3 endpoint (R2, Ceph, MinIO…).")
@click.option("--region", metavar="REGION", help="The bucket's region.")
@click.option("--profile", metavar="NAME", help="An AWS profile from ~/.aws/config.")
@click.option("--encrypt", is_flag=True, help="Encrypt everything client-side (AES-256-GCM).")
@click.option("--key-file", metavar="FILE", help="Where the encryption key is (any bytes).")
@click.option("--key-env", metavar="VAR", help="An environment variable holding the key.")
@render.json_option
@pass_state
def add_cmd(state: State, name: str, url: str, endpoint_url: str | None, region: str | None,
            profile: str | None, encrypt: bool, key_file: str | None, key_env: str | None,
            as_json: bool) -> None:
    """Add a remote NAME at URL (s3://BUCKET/PREFIX or file:///PATH).

    Nothing is sent until the first push. With --encrypt, the key stays where you keep it:
    ctrlz records the file path or the variable's name, never the key.

    \b
    Examples:
      ctrlz remote add origin s3://team-bucket/ctrlz --region eu-west-1
      ctrlz remote add backup file:///mnt/usb/ctrlz
    """
    from ..session.remotes import remotes

    spec = remotes.add_remote(state.workspace(), name, url, endpoint_url=endpoint_url,
                              region=region, profile=profile, encrypt=encrypt,
                              key_file=key_file, key_env=key_env)
    if as_json:
        render.emit_json({"type": "remote", "action": "added", **spec.to_json()})
        return
    render.out(f"added remote {spec.name} {spec.url}" + (" (encrypted)" if encrypt else ""))


@remote_group.command("list")
@render.json_option
@pass_state
def list_remotes_cmd(state: State, as_json: bool) -> None:
    """List this workspace's remotes, with how many snapshots each is not known to hold.

    \b
    Examples:
      ctrlz remote list --json
    """
    from ..session.remotes import remotes

    ws = state.workspace()
    specs = remotes.list_remotes(ws)
    behind = remotes.unpushed(ws)
    if as_json:
        render.emit_json([{**s.to_json(), "unpushed": len(behind.get(s.name, []))}
                          for s in specs])
        return
    if not specs:
        render.out("no remotes; add one with `ctrlz remote add NAME URL`")
        return
    render.table(["NAME", "URL", "ENDPOINT", "ENCRYPTED", "UNPUSHED"],
                 [[s.name, s.url, s.endpoint_url or "-", "yes" if s.encrypt else "no",
                   str(len(behind.get(s.name, [])))] for s in specs], right=(4,))


@remote_group.command("remove")
@click.argument("name")
@render.json_option
@pass_state
def remove_cmd(state: State, name: str, as_json: bool) -> None:
    """Forget the remote NAME here; what it holds is left as it is.

    \b
    Examples:
      ctrlz remote remove backup
    """
    from ..session.remotes import remotes

    spec = remotes.remove_remote(state.workspace(), name)
    if as_json:
        render.emit_json({"type": "remote", "action": "removed", **spec.to_json()})
        return
    render.out(f"removed remote {spec.name} ({spec.url}); its contents were not touched")


@remote_group.command("forget")
@click.argument("name")
@click.argument("snaps", nargs=-1, required=True, metavar="SNAP...")
@render.json_option
@pass_state
def forget_cmd(state: State, name: str, snaps: tuple[str, ...], as_json: bool) -> None:
    """Drop snapshots from the remote NAME's list (gc --remote reclaims their packs later).

    \b
    Examples:
      ctrlz remote forget origin snap_k3x9abcd
    """
    from ..session.remotes import remotes

    gone = remotes.forget(state.workspace(), name, snaps)
    if as_json:
        render.emit_json({"type": "forget", "remote": name, "forgotten": gone})
        return
    for i in gone:
        render.out(f"forgot {i} on {name}")
    render.note(f"Reclaim the space with: ctrlz gc --remote {name}")


def _progress(as_json: bool):  # type: ignore[no-untyped-def]
    if as_json or not render.is_tty():
        return None, None
    from rich.progress import DownloadColumn, Progress, TransferSpeedColumn

    bar = Progress(*Progress.get_default_columns()[:1], DownloadColumn(), TransferSpeedColumn(),
                   transient=True)
    task = bar.add_task("transfer", total=None)
    return bar, (lambda n: bar.advance(task, n))


@click.command("push")
@click.argument("name", required=False)
@click.argument("snaps", nargs=-1, metavar="[SNAP...]")
@click.option("--repair", is_flag=True,
              help="Download and check every object the push relies on, and upload again "
                   "any whose remote copy is damaged (after `verify --remote` found damage).")
@render.json_option
@pass_state
def push_cmd(state: State, name: str | None, snaps: tuple[str, ...], repair: bool,
             as_json: bool) -> None:
    """Upload snapshots to a remote (default: every snapshot it does not have yet).

    NAME defaults to remote.auto_push, then `origin`, then the only remote. Packs are
    uploaded once (content-addressed); the snapshot list is updated by compare-and-swap, so
    many machines can push at once. An interrupted push resumes where it stopped.

    \b
    Examples:
      ctrlz push
      ctrlz push origin latest
      ctrlz push origin baseline snap_k3x9abcd --json
      ctrlz push --repair       # after `ctrlz verify --remote` reported damage
    """
    from ..session.remotes import remotes

    ws = state.workspace()
    bar, progress = _progress(as_json)
    if bar is not None:
        bar.start()
    try:
        report = remotes.push_snapshots(ws, name, snaps, progress=progress, repair=repair)
    finally:
        if bar is not None:
            bar.stop()
    if as_json:
        render.emit_json(report.to_json())
        return
    n = len(report.pushed)
    render.out(f"pushed {n} snapshot{'s' if n != 1 else ''} to {report.remote}: "
               f"{report.objects} objects in {report.packs} packs "
               f"({render.size(report.bytes)}); {report.reused} objects were there already")
    if repair:
        render.note(f"{report.repaired} damaged remote "
                    f"cop{'ies were' if report.repaired != 1 else 'y was'} replaced")
    if report.already:
        k = len(report.already)
        render.note(f"{k} snapshot{'s' if k != 1 else ''} {'were' if k != 1 else 'was'} "
                    "there already")


@click.command("pull")
@click.argument("name", required=False)
@click.argument("snaps", nargs=-1, metavar="[SNAP...]")
@render.json_option
@pass_state
def pull_cmd(state: State, name: str | None, snaps: tuple[str, ...], as_json: bool) -> None:
    """Download this workspace's snapshots from a remote (default: all it has and we lack).

    Only objects the store lacks are fetched; each is checked against its id, and nothing
    is added unless everything arrived intact. The working tree is not touched: look with
    `ctrlz diff`, put one back with `ctrlz rollback`.

    \b
    Examples:
      ctrlz pull
      ctrlz pull origin snap_k3x9abcd --json
    """
    from ..session.remotes import remotes

    ws = state.workspace()
    bar, progress = _progress(as_json)
    if bar is not None:
        bar.start()
    try:
        report = remotes.pull_snapshots(ws, name, snaps, progress)
    finally:
        if bar is not None:
            bar.stop()
    if as_json:
        render.emit_json(report.to_json())
        return
    render.out(f"pulled {len(report.pulled)} snapshot{'s' if len(report.pulled) != 1 else ''} "
               f"from {report.remote}: {report.objects} objects "
               f"({render.size(report.bytes)})")
    for s in report.pulled:
        render.out(f"  {s.id}  {s.type}  {s.label or ''}".rstrip())


@click.command("clone")
@click.argument("url")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--snapshot", metavar="SNAP", help="Restore SNAP instead of the newest.")
@click.option("--workspace", metavar="ID|NAME",
              help="Which workspace, when the remote holds several: its id, its name, or the "
                   "start of its id.")
@click.option("--endpoint-url", metavar="URL", help="A non-AWS S3 endpoint.")
@click.option("--region", metavar="REGION", help="The bucket's region.")
@click.option("--profile", metavar="NAME", help="An AWS profile from ~/.aws/config.")
@click.option("--encrypt", is_flag=True, help="The remote is encrypted (give the key).")
@click.option("--key-file", metavar="FILE", help="Where the encryption key is.")
@click.option("--key-env", metavar="VAR", help="An environment variable holding the key.")
@render.json_option
def clone_cmd(url: str, directory: str, snapshot: str | None, workspace: str | None,
              endpoint_url: str | None, region: str | None, profile: str | None,
              encrypt: bool, key_file: str | None, key_env: str | None, as_json: bool) -> None:
    """Make DIRECTORY (new or empty) a workspace from the remote at URL.

    Every snapshot of the remote's workspace comes along (list, diff and roll back as on
    the machine that made them), the newest (or --snapshot) is restored into DIRECTORY, and
    the remote is added as `origin`, so `ctrlz push` sends new snapshots back.

    \b
    Examples:
      ctrlz clone s3://team-bucket/ctrlz ~/work/app
      ctrlz clone file:///mnt/nas/ctrlz /tmp/app --snapshot baseline
    """
    from ..session.remotes.cloning import clone

    if encrypt and key_file:
        from pathlib import Path

        key_file = str(Path(key_file).expanduser().resolve())
    ws, report, restored = clone(
        url, directory, snapshot=snapshot, workspace=workspace, endpoint_url=endpoint_url,
        region=region, profile=profile, encrypt=encrypt, key_file=key_file, key_env=key_env)
    with ws:
        if as_json:
            render.emit_json({"type": "clone", "workspace": str(ws.root),
                              "snapshots": [s.id for s in report.pulled],
                              "restored": restored.target.id,
                              "objects_fetched": report.objects,
                              "bytes_fetched": report.bytes})
            return
        files = sum(1 for a in restored.applied if a.op in ("write", "symlink"))
        render.out(f"cloned {len(report.pulled)} snapshots into "
                   f"{render.path_text(str(ws.root))}; restored "
                   f"{restored.target.id} ({files} files)")


COMMANDS = [remote_group, push_cmd, pull_cmd, clone_cmd]


# -- views used by the existing commands' --remote options (list, verify, gc, status) ---------


def list_remote(state: State, name: str, as_json: bool) -> None:
    """``ctrlz list --remote NAME``: the remote's snapshots of this workspace, newest first,
    with who made each."""
    from ..session.remotes import remotes

    ws = state.workspace()
    spec, found = remotes.remote_listing(ws, name)
    here = {s.id for s in ws.snapshots()}
    found = list(reversed(found))
    if as_json:
        render.emit_json([{"id": e["id"], "type": e.get("type"), "label": e.get("label"),
                           "created_ns": e.get("created_ns"), "files": e.get("files"),
                           "bytes": e.get("bytes"), "root": e.get("root"),
                           "local": e["id"] in here, "origin": e.get("origin") or {}}
                          for e in found])
        return
    rows = [[e["id"], str(e.get("type")), e.get("label") or "",
             render.size(e.get("bytes")), *_origin_text(e),
             render.ago(int(e.get("created_ns") or 0)), "yes" if e["id"] in here else "no"]
            for e in found]
    render.table(["ID", "TYPE", "LABEL", "SIZE", "MACHINE", "USER", "AGENT", "SESSION",
                  "CREATED", "HERE"], rows, right=(3,))
    render.out(f"{len(found)} snapshot{'s' if len(found) != 1 else ''} on {spec.name} "
               f"({spec.url})")


def verify_remote(state: State, name: str, as_json: bool) -> None:
    from ..errors import RemoteError
    from ..session.remotes import remotes

    report = remotes.verify(state.workspace(), name)
    if as_json:
        render.emit_json(report.to_json())
    else:
        render.out(f"checked {report.snapshots} snapshots of {report.workspaces} workspaces on "
                   f"{report.remote}: {report.objects} objects ({render.size(report.bytes)}) "
                   f"in {report.packs} packs")
        if report.unreferenced_packs is None:
            render.out("packs no snapshot reaches: not counted (a damaged or missing tree "
                       "hides what lies below it)")
        elif report.unreferenced_packs:
            render.out(f"{report.unreferenced_packs} packs no snapshot reaches (reclaimable "
                       f"with `ctrlz gc --remote {report.remote}`)")
        for e in report.errors:
            render.out(f"error: {e}")
        render.out("ok" if report.ok else f"{len(report.errors)} problems found")
    if not report.ok:
        click.get_current_context().exit(RemoteError.exit_code)


def gc_remote(state: State, name: str, dry_run: bool, as_json: bool) -> None:
    from ..session.remotes import remotes

    report = remotes.gc(state.workspace(), name, dry_run=dry_run)
    if as_json:
        render.emit_json(report.to_json())
        return
    verb = "would delete" if dry_run else "deleted"
    render.out(f"{report.remote}: {report.live_packs} live packs; {verb} {len(report.deleted)} "
               f"({render.size(report.deleted_bytes)}); condemned {len(report.condemned)} "
               f"more, {report.waiting} waiting out the {int(report.grace_seconds)} s grace "
               "period")
    if report.repacked:
        render.out(f"{'would repack' if dry_run else 'repacked'} {len(report.repacked)} "
                   "mostly-garbage packs (their live objects copied; the old packs go once "
                   "the grace period is over)")


def status_lines(ws: Any) -> dict[str, Any]:
    """``status``'s remote part: per remote, the snapshots it is not known to hold."""
    if not (ws.store_path / "remotes.db").is_file():
        return {}
    from ..session.remotes import remotes

    return {name: {"unpushed": len(ids)} for name, ids in remotes.unpushed(ws).items()}
