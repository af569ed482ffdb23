"""Ignore rules: which paths a snapshot covers (gitignore files, patterns, globs)."""
