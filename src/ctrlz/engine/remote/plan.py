"""What a push sends and what it relies on (:mod:`.push`, step 2): the walk of the snapshots'
trees against the remote index, skipping trees the known-complete cache vouches for."""

from __future__ import annotations

from ...state.remote.known import KnownTrees
from ...state.remote.repo import RemoteIndex, RemoteRepo
from ...state.store.repository import Repository
from ..reach import Needed, needed_objects
from .chunklists import chunked_among, read_lists


class Plan:
    """What a push sends and what it relies on: the walk of the snapshots' trees, skipping
    trees the known-complete cache vouches for (while every pack it names is usable)."""

    def __init__(self, repo: Repository, remote: RemoteRepo, index: RemoteIndex,
                 roots: list[bytes], known: KnownTrees, condemned: set[bytes]) -> None:
        self.repo = repo
        self.remote = remote
        self.index = index
        self.roots = roots
        self.condemned = condemned
        usable = known.packs <= index.packs.keys() and known.packs.isdisjoint(condemned)
        self.known = known if usable else KnownTrees()
        #: pack -> objects this push takes from it (the cache's packs: objects unknown)
        self.relied: dict[bytes, set[bytes]] = {}
        self.walked: set[bytes] = set()  # every tree entered: complete on the remote after
        self.hits: set[bytes] = set()  # known-complete trees this push reuses
        self.needed = Needed()
        self.checked: set[bytes] = set()  # chunked blobs whose chunks were relied on
        self.parent_of: dict[bytes, bytes] = {}  # chunk -> a chunked blob it belongs to
        self.damaged: set[bytes] = set()  # objects whose remote copy is bad (``repair``)

    def has(self, oid: bytes) -> bool:
        """Does the remote hold ``oid`` in a pack gc keeps? If so, this push relies on it."""
        loc = self.index.objects.get(oid)
        if loc is None or loc.pack in self.condemned or oid in self.damaged:
            return False
        self.relied.setdefault(loc.pack, set()).add(oid)
        return True

    def walk(self) -> None:
        self.relied = {p: set() for p in self.known.packs}
        self.walked, self.hits, self.checked = set(), set(), set()

        def complete(oid: bytes) -> bool:
            if oid in self.known.trees:
                self.hits.add(oid)
                return True
            self.walked.add(oid)
            return False

        self.needed = needed_objects(self.repo.tree, self.roots, has=self.has,
                                     complete=complete)
        self._rely_on_chunks()

    def _rely_on_chunks(self) -> None:
        """A chunked blob the remote holds is relied on with its chunks: their packs can be
        condemned while the list's pack lives on for other objects, and a push that revived
        the blob would then lose its chunks a grace period later. A blob with a chunk gone
        or condemned is sent again (its missing chunks and a new list)."""
        reused = [(oid, loc) for oid, loc in chunked_among(self.index, (
            o for objs in self.relied.values() for o in objs)) if oid not in self.checked]
        for oid, chunks in read_lists(self.remote, reused).items():
            self.checked.add(oid)
            ok = True
            for cid, _n in chunks:
                self.parent_of.setdefault(cid, oid)
                ok = self.has(cid) and ok
            if not ok:
                self.needed.blobs.append(oid)

    def reused(self) -> int:
        return sum(len(v) for v in self.relied.values())

    def drop_known(self, condemned: set[bytes]) -> None:
        """A pack of the cache was condemned: walk everything, relying only on what the walk
        finds (the cache cannot say which objects sit in which of its packs)."""
        self.known = KnownTrees()
        self.condemned = condemned
        self.index.avoid(condemned)
        self.walk()
