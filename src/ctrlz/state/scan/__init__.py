"""The scanner: walk one tracked root with lstat only and turn it into tree objects.

The walk never follows a symlink: links are captured as links (their target is the blob), and a
directory is entered through ``os.scandir`` on a path whose every component was seen as a real
directory. FIFOs, sockets and devices are skipped and reported, as are files that cannot be read,
files over the new-file size limit, and files that keep changing while they are read. Nothing
skipped is ever deleted or overwritten by a restore, because the snapshot records it.

Cost follows change, not size: a file whose stat matches the stat cache (and is not racily
clean) is not read, and a directory whose listing and children all match keeps its tree id
without re-encoding. Small files that must be read are read by the walking thread itself;
large ones go to a small thread pool (read, hash and compress release the GIL) while the walk
goes on. The main thread alone appends to the pack.

The parts, one job each:

* :mod:`.model` -- limits, results, and the per-directory node and entry slots;
* :mod:`.walk` -- listing a directory from the disk: exclusions, stat-cache comparison;
* :mod:`.reader` and :mod:`.sinks` -- reading and hashing files (inline or on the pool),
  into the store or only through the hash;
* :mod:`.incremental` -- dirty scans: directories listed from the cache, cached trees
  patched, the copied stat cache pruned;
* :mod:`.build` -- tree objects, cache entries and change counts, deepest directory first;
* :mod:`.context` -- :class:`~.context.ScanContext`, one scan's state, which every step takes;
* :mod:`.scanner` -- :class:`Scanner`, the context plus the two passes that run the steps.
"""

from .model import Changes, DirtyDirs, Limits, ScanResult, ScanStats

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .scanner import Scanner
    from .sinks import HashSink, Sink, StoreSink

_LAZY = {"Scanner": "scanner", "HashSink": "sinks", "Sink": "sinks", "StoreSink": "sinks"}


def __getattr__(name: str) -> object:
    """The scanner and sinks load on first use: the configuration needs only :class:`Limits`,
    and a command that opens a workspace to read it should not pay for the scanner's thread
    pool and reader (``concurrent.futures``, ``logging``)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value

__all__ = ["Changes", "DirtyDirs", "HashSink", "Limits", "ScanResult", "ScanStats", "Scanner",
           "Sink", "StoreSink"]
