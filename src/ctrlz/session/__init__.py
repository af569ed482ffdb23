"""The session layer: decides WHEN to snapshot and records what happened.

run
    ``ctrlz run``: pre-run snapshot, the command under a watcher and a tracer, automatic
    snapshots, post-run snapshot, reconciliation
scheduler
    the timer, git, build and idle triggers, and the one worker that takes snapshots
triggers
    pure rules: which exec events are git commits or builds
policy
    what a face may do to snapshots: which may be deleted, compaction, names, free manual slots
"""
