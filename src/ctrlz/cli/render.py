"""Rendering for the CLI: JSON on stdout, messages on stderr, tables, sizes and relative times.

Nothing here knows about the store; it only formats records the library returns.
"""

from __future__ import annotations

import sys
import time

from .. import jsontext
from ..quoting import quote_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, TypeVar

    F = TypeVar("F", bound=Callable[..., Any])


def json_option(f: F) -> F:
    """``--json``, declared identically on every command that lists or reports."""
    import click

    return click.option("--json", "as_json", is_flag=True,
                        help="Print machine-readable JSON on stdout (messages go to stderr).")(f)


def echo(text: str, err: bool = False, nl: bool = True) -> None:
    """Text to stdout (or stderr), as ``click.echo`` writes it on Linux, without importing
    click (a third of ``ctrlz list``'s cold start, see :mod:`ctrlz.cli.listing`): stdout keeps
    a path's undecodable bytes as they were on disk (surrogate escapes back to bytes), stderr
    shows them escaped, an ASCII-only locale still gets UTF-8, and every line is flushed."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    if nl:
        text += "\n"
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # a replaced stream (a test's capture)
        stream.write(text)
        stream.flush()
        return
    encoding = stream.encoding or "utf-8"
    if encoding.lower().replace("-", "").replace("_", "") in ("ascii", "usascii",
                                                              "ansix3.41968"):
        encoding = "utf-8"
    stream.flush()  # anything written through the text layer goes first
    buffer.write(encoded(text, err, encoding))
    buffer.flush()


def encoded(text: str, err: bool, encoding: str = "utf-8") -> bytes:
    """The bytes :func:`echo` writes of ``text``: a path's undecodable bytes as they were on
    stdout, escaped on stderr."""
    return text.encode(encoding, "backslashreplace" if err else "surrogateescape")


#: how a path is shown in one line of output: the quoting of every message (``ctrlz.types``)
path_text = quote_text


def json_text(data: Any) -> str:
    """The text of every ``--json`` output: indented, non-ASCII as it is. A name that is not
    UTF-8 (its bytes kept as surrogate escapes) goes out as ``\\udcXX``, as the service's API
    and the tool-call inbox write it: :func:`echo` would put its raw bytes on stdout, and the
    output would not be JSON. ``json.loads`` gives back the surrogates, and ``os.fsencode``
    the exact bytes."""
    text = jsontext.dumps(data, indent=2, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a surrogate only ever stands inside a JSON string
        text = "".join(f"\\u{ord(c):04x}" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def emit_json(data: Any) -> None:
    echo(json_text(data))


def out(text: str = "") -> None:
    echo(text)


def note(text: str) -> None:
    """A message for the person, never data: stderr."""
    echo(text, err=True)


def is_tty() -> bool:
    return sys.stdout.isatty()


def size(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(abs(n))
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            text = f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
            return ("-" if n < 0 else "") + text
        value /= 1024
    return str(n)


def signed_size(n: int) -> str:
    return ("+" if n >= 0 else "-") + size(abs(n))


def ago(created_ns: int, now_ns: int | None = None) -> str:
    seconds = max(0, ((now_ns or time.time_ns()) - created_ns) // 1_000_000_000)
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= length:
            return f"{seconds // length}{unit} ago"
    return f"{seconds}s ago" if seconds else "just now"


def parse_duration(text: str) -> float:
    """``90``, ``30s``, ``15m``, ``12h``, ``7d``, ``2w`` to seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    raw = text.strip().lower()
    try:
        if raw and raw[-1] in units:
            return float(raw[:-1]) * units[raw[-1]]
        return float(raw)
    except ValueError:
        import click

        raise click.BadParameter(f"{text!r} is not a duration like 30m, 12h or 7d") from None


def table(headers: Sequence[str], rows: Sequence[Sequence[str]],
          right: Sequence[int] = ()) -> None:
    """A table: rich on a terminal, plain aligned columns (:func:`table_lines`) otherwise."""
    if is_tty():
        from rich.console import Console
        from rich.table import Table

        t = Table(box=None, header_style="bold", pad_edge=False)
        for i, h in enumerate(headers):
            t.add_column(h, justify="right" if i in right else "left")
        for r in rows:
            t.add_row(*r)
        Console().print(t)
        return
    for line in table_lines(headers, rows, right):
        out(line)


def table_lines(headers: Sequence[str], rows: Sequence[Sequence[str]],
                right: Sequence[int] = ()) -> list[str]:
    """A table as plain aligned columns, a line each (the header first): what is printed
    when stdout is not a terminal."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def patch(text: str) -> None:
    """A unified diff, coloured on a terminal."""
    if not is_tty():
        echo(text, nl=False)
        return
    import click

    for line in text.splitlines(keepends=True):
        if line.startswith(("+++", "---")):
            echo(click.style(line, bold=True), nl=False)
        elif line.startswith("+"):
            echo(click.style(line, fg="green"), nl=False)
        elif line.startswith("-"):
            echo(click.style(line, fg="red"), nl=False)
        elif line.startswith("@@"):
            echo(click.style(line, fg="cyan"), nl=False)
        else:
            echo(line, nl=False)


def snapshot_summary(s: dict[str, Any]) -> str:
    """``+created ~modified -deleted, <bytes> added``, from a snapshot's JSON form."""
    c = s["changes"]
    return f"+{c['created']} ~{c['modified']} -{c['deleted']}, {size(s['added_bytes'])} added"


def plan_summary(counts: dict[str, int]) -> str:
    return (f"{counts.get('created', 0)} to create, {counts.get('modified', 0)} to modify, "
            f"{counts.get('deleted', 0)} to delete, {counts.get('permissions_changed', 0)} "
            "mode changes")


def done_summary(counts: dict[str, int]) -> str:
    return (f"{counts.get('created', 0)} created, {counts.get('modified', 0)} modified, "
            f"{counts.get('deleted', 0)} deleted, {counts.get('permissions_changed', 0)} "
            "mode changes")
