"""The session layer: decides WHEN to snapshot and records what happened.

protected / restores / policy
    an open workspace and its pools; restores with undo and redo; what a face may do to
    snapshots (which may be deleted, compaction, names, free manual slots)
config / locator / reports
    settings, where a workspace's store lives, the results handed to faces
daemon_client / served / restore_wire
    asking the workspace daemon, and a restore's result on its socket
daemon/
    the workspace daemon: its process, start-up, serving thread and watcher audit
run/
    ``ctrlz run``: pre-run snapshot, the command under a watcher and a tracer, the triggers
    and the worker that takes automatic snapshots, post-run snapshot, the sandbox
remotes/
    which remote, push and pull, background push, clone
"""
