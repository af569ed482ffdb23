"""Remotes of a workspace: which remote, push and pull, background push, clone."""
