"""``python -m ctrlz.service [--port N] [--no-gateway] [--log FILE]``: the service in the
foreground, as ``ctrlz service run`` (the systemd unit and ``ctrlz service start`` use this,
so the service's process does not load the CLI)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctrlz.service")
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--no-gateway", action="store_true")
    parser.add_argument("--log", type=Path, default=None)
    args = parser.parse_args(argv)
    from ..errors import CtrlzError
    from .server import run, setup_logging

    setup_logging(args.log)
    point = os.environ.get("CTRLZ_FAILPOINT")  # crash tests: die at NAME[:AFTER]
    if point:
        from ..state import failpoints

        name, _, after = point.partition(":")
        failpoints.arm(name, int(after or 0))
    try:
        return run(args.port, gateway=not args.no_gateway)
    except CtrlzError as exc:
        print(f"ctrlz: error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
