"""``python -m ctrlz.service [--port N] [--no-gateway] [--log FILE]``: the service in the
foreground, as ``ctrlz service run`` (the systemd unit and ``ctrlz service start`` use this,
so the service's process does not load the CLI)."""

from __future__ import annotations

import argparse
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
    try:
        return run(args.port, gateway=not args.no_gateway)
    except CtrlzError as exc:
        print(f"ctrlz: error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
