"""Write src/ctrlz/door/protocol.h, the C door's copy of the wire protocol, from its one
definition, src/ctrlz/protocol.py (tests/door/test_protocol.py fails when the header is
not what this writes; run this script then, and rebuild the door: `make .venv/.installed`).

Only macros and one type, so that any of the door's C files may include it."""

from __future__ import annotations

import sys
from pathlib import Path

from ctrlz import protocol
from ctrlz.errors import RestoreError

OUT = Path(__file__).resolve().parent.parent / "src" / "ctrlz" / "door" / "protocol.h"


def c_string(text: str) -> str:
    """A C string literal of ``text``: printable ASCII, as every name here is."""
    if not (text.isascii() and text.isprintable()) or '"' in text or "\\" in text:
        raise ValueError(f"not a plain C string: {text!r}")
    return f'"{text}"'


def ms(seconds: float) -> int:
    value = seconds * 1000
    if value != int(value):
        raise ValueError(f"{seconds} s is not a whole number of milliseconds")
    return int(value)


def forms() -> list[str]:
    """The initializer of the door's table of forms, one line a form."""
    lines = []
    for form in protocol.FORMS:
        if len(form.options) > 32:  # the door tells them apart by the bits of an unsigned
            raise ValueError(f"{form!r}: more than 32 options")
        options = ", ".join([*map(c_string, form.options), "NULL"])
        lines.append(f"    {{{c_string(form.command)}, {int(form.operand is not None)}, "
                     f"{int(form.once)}, (const char *const[]){{{options}}}}}, \\")
    lines.append("    {NULL, 0, 0, NULL}}")
    return lines


def wrapped(items: list[str], indent: str = "    ", width: int = 96) -> list[str]:
    """``items``, comma-separated, in lines of a macro's body (each ending in a backslash)."""
    lines, line = [], indent
    for item in items:
        if line != indent and len(line) + len(item) + 2 > width:
            lines.append(line.rstrip() + " \\")
            line = indent
        line += f"{item}, "
    return [*lines, line.rstrip(", ")]


def render() -> str:
    env_names = wrapped([*map(c_string, protocol.ENV_NAMES), "NULL"])
    return "\n".join([
        "/* The native door's wire protocol, written by scripts/gen_door_header.py from its one",
        " * definition, src/ctrlz/protocol.py (where each value says why it is what it is).",
        " * Do not edit: tests/door/test_protocol.py fails when this is not what the script",
        " * writes. */",
        "#ifndef CTRLZ_DOOR_PROTOCOL_H",
        "#define CTRLZ_DOOR_PROTOCOL_H",
        "",
        f"#define DOOR_OP {c_string(protocol.OP)}",
        f"#define DOOR_VERSION {protocol.VERSION}",
        f"#define SOCKET_NAME {c_string(protocol.SOCKET_NAME)}",
        f"#define STARTING_NAME {c_string(protocol.STARTING_NAME)}",
        f"#define CONNECT_TIMEOUT_MS {ms(protocol.CONNECT_TIMEOUT_S)}",
        f"#define REPLY_TIMEOUT_MS {ms(protocol.REPLY_TIMEOUT_S)}",
        f"#define HOOK_REPLY_TIMEOUT_MS {ms(protocol.HOOK_REPLY_TIMEOUT_S)}",
        f"#define HOOK_START_BY_NS {ms(protocol.HOOK_START_BY_S)}000000LL",
        f"#define REPLY_MAX {protocol.DOOR_REPLY_MAX}u",
        f"#define HOOK_INPUT_MAX {protocol.HOOK_INPUT_MAX}u",
        f"#define HOOK {c_string(protocol.HOOK)}",
        f"#define HOOK_MIN_ARGS {protocol.HOOK_ARGS[0]}",
        f"#define HOOK_MAX_ARGS {protocol.HOOK_ARGS[1]}",
        f"#define ENV_PREFIX {c_string(protocol.ENV_PREFIX)}",
        f"#define OFF_VAR {c_string(protocol.OFF_VAR)}",
        f"#define TRACE_VAR {c_string(protocol.TRACE_VAR)}",
        f"#define TRACE_PREFIX {c_string(protocol.TRACE_PREFIX)}",
        f"#define RESTORE_FAILED {RestoreError.exit_code}  /* a failed restore's exit status */",
        "",
        "/* the variables the request carries besides every ENV_PREFIX one */",
        "#define ENV_NAMES_INIT { \\",
        *env_names[:-1],
        env_names[-1] + "}",
        "",
        "/* a command line the door hands to the daemon: COMMAND [OPERAND] [OPTION...], each",
        " * option at most once, in any order (ctrlz.protocol.Form) */",
        "typedef struct {",
        "    const char *command;",
        "    int operand;                 /* one argument that is not an option comes first */",
        "    int once;                    /* never asked twice: a rollback */",
        "    const char *const *options;  /* NULL-terminated */",
        "} door_form;",
        "",
        "/* every form the door serves, and {NULL...} */",
        "#define DOOR_FORMS_INIT { \\",
        *forms(),
        "",
        "#endif",
        "",
    ])


def main() -> int:
    OUT.write_text(render(), encoding="ascii")
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
