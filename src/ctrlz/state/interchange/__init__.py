"""Snapshots leaving a store: archives, object transfer, portable snapshot records."""
