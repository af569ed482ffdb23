"""The ctrlz service: one long-running process per user, a face like the CLI and the MCP server.

Words:

- **service** — the process ``ctrlz service run`` starts (:mod:`.server`). It serves the
  **API** (versioned ``/v1/...`` paths, JSON in the shapes of the CLI's ``--json``; routes in
  :mod:`.api_read` and :mod:`.api_actions`, dispatch in :mod:`.routing`) on a Unix socket that
  only its owner can open (:mod:`.runtime` says where).
- **gateway** — the same API on ``127.0.0.1`` for a browser, behind a bearer token or a login
  cookie, a Host check, own-origin CORS, a CSRF header and a body limit (:mod:`.gateway`),
  plus the dashboard's files (:mod:`ctrlz.web`).
- **watcher** — the per-workspace daemon (:mod:`ctrlz.session.daemon.daemon`); the service starts
  one for each *registered* workspace (:mod:`ctrlz.session.registry`) and restarts it when it
  dies (:mod:`.supervisor`).
- **event** — a new snapshot, a restore, an undo, a tool call, a watcher's change of state,
  sent to ``GET /v1/events`` subscribers as server-sent events (:mod:`.events`).

Nothing here decides what a snapshot or a restore is: every handler opens the workspace and
calls the same library function the CLI calls (so every change to a workspace goes through the
one restore engine). The service is never required: the CLI, the hooks and the MCP server work
the same without it.
"""
