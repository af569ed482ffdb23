"""The records beside the objects: the catalog, the oplog, sessions, stat cache, inbox."""
