"""Putting tool calls back: fs_restore, turn rollback and redo, rewind, fork."""
