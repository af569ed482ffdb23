"""Remote sync: what to push, pull, check and collect, on top of :mod:`ctrlz.state.remote`.

* :mod:`.refs` — a workspace's ref document and its compare-and-swap update loop
* :mod:`.walk` — walking snapshots whose trees live on the remote, level by level
* :mod:`.push` — upload the objects a snapshot needs, then name it in the ref
* :mod:`.plan` — a push's walk: what the remote lacks, and what the push relies on
* :mod:`.pull` — fetch a remote snapshot's missing objects into the local store, all or nothing
* :mod:`.check` — ``verify --remote``: every object every ref names, re-hashed
* :mod:`.gc` — lock-free collection of unreferenced packs (the rule is in ``docs/remote.md``)
* :mod:`.repack` — gc's copying of live objects out of mostly-garbage packs

The engine gets its remote, its workspace id and the provenance of each snapshot from the
session layer (:mod:`ctrlz.session.remotes.remotes`); it never reads the environment or
configuration.
"""
