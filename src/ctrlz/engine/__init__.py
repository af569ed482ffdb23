"""The engine: what a snapshot is and how to put it back.

snapshot
    scan every tracked root into trees, store new objects, commit one catalog row
diff
    compare two Merkle trees (or a tree and the working tree), skipping equal subtrees
plan / apply / restore
    the safety contract: safety snapshot, full plan, atomic apply, verification
verify / gc
    re-hash everything reachable; drop and repack what nothing reaches
refs
    turn an id, prefix, label, number, ``latest`` or ``cp-N`` into a snapshot

The engine knows nothing of faces, sessions or agents.
"""
