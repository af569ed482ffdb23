"""Platform file I/O: atomic replacement, direct I/O, copy-on-write clones, thread pools."""
