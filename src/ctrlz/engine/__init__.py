"""The engine: what a snapshot is and how to put it back.

snapshot
    scan every tracked root into trees, store new objects, commit one catalog row; ``writing``,
    the one hold on the store (lock, crash clean-up) an operation enters once
diff
    compare two Merkle trees (or a tree and the working tree), skipping equal subtrees
restore/
    the safety contract: safety snapshot, full plan, atomic apply, verification, the journal
    that lets the next opener finish or undo an interrupted restore
verify / gc / retention
    re-hash everything reachable; drop and repack what nothing reaches; what is kept
refs
    turn an id, prefix, label, number, ``latest`` or ``cp-N`` into a snapshot
remote/
    push, pull and check against a remote store

The engine knows nothing of faces, sessions or agents.
"""
