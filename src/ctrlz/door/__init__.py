"""The native door: ``ctrlz snapshot``, ``ctrlz list`` and ``ctrlz rollback SNAP`` (each with
or without ``--json``), and every agent hook (``ctrlz-hook AGENT [EVENT]``), answered by the
workspace daemon without starting Python.

Why: a served snapshot costs the workspace daemon 2-5 ms, but a fresh Python interpreter costs
11-24 ms before ctrlz runs a line (its ``site`` module alone 5 ms), against 7-13 ms for the
whole of ``git add -A && git commit`` on the same machines. The snapshot that agents, their
shell wrappers and scripts run most, the listing they poll, and the hook an agent waits for
before every tool call were therefore mostly interpreter start-up (a Claude Code ``Edit``
hook: 80 ms, of which the capture itself is under 15). Mercurial met the same wall with
``chg``, a C client for a resident server; this is ctrlz's.

How:

* ``ctrlz`` is a small C program (``client.c``, the program; ``wire.c``, JSON text;
  ``locate.c``, where the store is; ``trace.c``, what it did), built by ``setup.py`` where a
  C compiler is at hand on Linux; elsewhere ``ctrlz`` is the Python script beside this
  file, the same CLI.
* For those plain forms it finds the workspace's store as :func:`ctrlz.session.locator.locate`
  does, and when the store's daemon socket is there it hands the command over whole (``op:
  door``): its arguments, its working directory, whether stdout is a terminal, the workspace
  and store it found, and the environment that decides the settings and the output's
  encoding.
* The daemon answers in :mod:`.serve`, a face running in the daemon's process: it locates
  the store again, from the caller's environment, with the one locator, so the C program's
  search only ever finds a daemon, never decides which workspace is snapshotted; it loads the
  caller's settings (:func:`ctrlz.session.config.load_config` with the caller's environment), takes
  the snapshot or runs the rollback as for any served request (or reads the catalog, for a
  listing), and renders it with the CLI's own functions (:func:`ctrlz.cli.taking.lines`,
  :func:`ctrlz.cli.listing.lines`, :func:`ctrlz.cli.rolling.report_lines`). The client
  writes those bytes and exits with the status. A rollback is at most once (see
  :mod:`.serve`).
* ``ctrlz-hook`` is the same program (it tells by its name): it reads the agent's payload
  from stdin and hands it over with the caller's directory and environment; the daemon runs
  the hook's own Python on it (:func:`ctrlz.hooks.runner.handle_recorded`), taking a shell
  call's snapshot itself, when the payload's workspace is the daemon's and the caller's
  settings are its settings. Anything else, and a daemon that took the payload but gave no
  answer, runs the Python hook on the same payload: a hook's work is done at least once,
  never lost (done again, a file's capture or a shell call's snapshot is the same one; at
  worst a prompt opens one empty turn more). It always exits 0, as the Python hook does.
* Anything else runs the Python CLI (``python -P -c``, the interpreter ``ctrlz`` was
  installed with): every other command and form, no workspace, no daemon, a daemon that
  declines (other settings, an output encoding other than UTF-8, a listing's table bound for
  a terminal, a rollback whose progress bar would, a full manual pool, a restore's
  journal...), a daemon that does not answer (except after a rollback was sent: then an
  error, as from the Python client).
  The Python CLI then meets each case with its full handling, as it did before the door
  existed; the door only ever adds speed.

``CTRLZ_DOOR=0`` sends every command to the Python CLI; ``CTRLZ_DOOR_TRACE=1`` makes the
door say on stderr what it did and why, every hand-over included (and the Python CLI, why it
did the work itself rather than the daemon). :mod:`.program` is the daemon's program: the
session's daemon with the door's request added (a face, so the session never imports the CLI).
:mod:`.protocol` is what the C door, the daemon and the Python CLI share, defined once: the
forms, the version, the sizes and timeouts (``protocol.h`` is written from it by
``scripts/gen_door_header.py``).
"""
