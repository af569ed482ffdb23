"""Exec tracing for ``ctrlz run``: every process a command starts, recorded through strace.

The pieces, smallest first, one module each:

* :mod:`.events` -- :class:`ExecEvent`, one exec: Moat's ExecEvent plus the exit signal.
* :mod:`.parser` -- :class:`StraceParser`, a pure, line-at-a-time state machine over
  strace's ``-o`` output (no I/O), so it is unit-tested with recorded lines.
* :mod:`.denials` -- :class:`Denial`, one write a sandbox refused, read from the same output.
* :mod:`.follower` -- :class:`TraceFollower`, a thread tailing the ``-o`` file while the
  command runs.
* :mod:`.procs` -- :class:`ProcessSampler`, where strace cannot run: the command, and the
  processes psutil sees under it (an optional dependency; a partial record).
* :mod:`.tracer` -- :class:`Tracer` probes strace once, builds the wrapped command line, and
  :meth:`Tracer.run` wires the three together. Without strace (or where ptrace is
  forbidden) it reports why in :attr:`Tracer.reason` and runs the command with the sampler.
"""

from .denials import Denial
from .events import ExecEvent
from .follower import TraceFollower
from .parser import StraceParser, unescape_c_string
from .procs import ProcessSampler
from .tracer import Tracer, TraceResult, strace_available

__all__ = [
    "Denial",
    "ExecEvent",
    "ProcessSampler",
    "StraceParser",
    "TraceFollower",
    "TraceResult",
    "Tracer",
    "strace_available",
    "unescape_c_string",
]
