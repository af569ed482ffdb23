"""Write src/ctrlz/cli/help_text.py: `ctrlz --help` as click renders it, at the two widths most
terminals give (80 columns, or 100 and wider), so that `ctrlz --help` prints it without loading
click (tests/cli/test_lazy_commands.py fails when it is stale; run this script then)."""

from __future__ import annotations

from pathlib import Path

import click

from ctrlz.cli.app import cli

OUT = Path(__file__).resolve().parent.parent / "src" / "ctrlz" / "cli" / "help_text.py"


def render(columns: int) -> str:
    """What a terminal of ``columns`` columns gets: click formats to the terminal's width
    (at most ``max_content_width``) less two."""
    settings = dict(cli.context_settings)
    width = min(columns, settings.pop("max_content_width", 80)) - 2
    ctx = click.Context(cli, info_name="ctrlz", terminal_width=width, **settings)
    return cli.get_help(ctx) + "\n"


def main() -> None:
    texts = {columns: render(columns) for columns in (80, 100)}
    body = ['"""`ctrlz --help`, pre-rendered by scripts/gen_help_text.py: do not edit by hand."""',
            "", "# ruff: noqa: E501", "", "HELP = {"]
    for columns, text in texts.items():
        body.append(f"    {columns}: {text!r},")
    body += ["}", ""]
    OUT.write_text("\n".join(body))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
