"""The object store: a repository's objects, packs and clones, and their upkeep."""
