#!/usr/bin/env bash
# ctrlz end to end on a scratch workspace: snapshot, damage, diff, rollback, prove it is
# byte-identical again, then undo/redo. Run by `make demo` (with the venv's bin on PATH).
set -euo pipefail

command -v ctrlz >/dev/null || { echo "demo: ctrlz is not on PATH (run: make demo)" >&2; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ctrlz-demo.XXXXXX")
trap 'chmod -R u+rwX "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
export CTRLZ_HOME="$TMP/home" XDG_CONFIG_HOME="$TMP/config"
unset CTRLZ_MANUAL_MAX CTRLZ_AUTO_MAX CTRLZ_STORE_CAP || true
WS="$TMP/app"

if [ -t 1 ]; then B=$'\033[1m' G=$'\033[1;32m' N=$'\033[0m'; else B= G= N=; fi
step() { printf '\n%s== %s%s\n' "$B" "$*" "$N"; }
show() { printf '$ %s\n' "$*"; "$@"; }

# A fingerprint of everything a rollback must put back: path, kind, mode, size, content, links.
fingerprint() {
    (cd "$1" && find . \( -type d -printf '%p d %m\n' \) -o -printf '%p %y %m %s %l\n' \
        | LC_ALL=C sort
     find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum)
}

step "a small project"
mkdir -p "$WS/src/lib" "$WS/docs" "$WS/assets"
printf '# app\n\nA demo project.\n' > "$WS/README.md"
printf 'def main():\n    print("hello")\n' > "$WS/src/app.py"
printf 'X = 1\n' > "$WS/src/lib/util.py"
printf 'guide\n' > "$WS/docs/guide.txt"
head -c 4096 /dev/urandom > "$WS/assets/logo.bin"
chmod 755 "$WS/src/app.py"
ln -s README.md "$WS/readme-link"
cd "$WS"
find . | LC_ALL=C sort

step "protect it and take a baseline"
show ctrlz init
show ctrlz snapshot -m baseline
fingerprint "$WS" > "$TMP/before.txt"
cp -a "$WS" "$TMP/pristine"

step "damage it: delete, edit, chmod, replace a folder with a symlink"
rm "$WS/docs/guide.txt" "$WS/assets/logo.bin"
printf 'def main():\n    raise SystemExit("broken")\n' > "$WS/src/app.py"
chmod 600 "$WS/README.md"
rm -rf "$WS/src/lib" && ln -s /etc "$WS/src/lib"
printf 'junk\n' > "$WS/junk.txt"

step "what changed"
show ctrlz diff --name-status
show ctrlz diff

step "roll back"
show ctrlz rollback baseline

step "prove the tree is byte-identical to the baseline"
fingerprint "$WS" > "$TMP/after.txt"
if ! diff -u "$TMP/before.txt" "$TMP/after.txt"; then
    echo "demo: FAILED: the workspace differs from the baseline after rollback" >&2
    exit 1
fi
diff -r --no-dereference "$TMP/pristine" "$WS"
echo "OK: byte-identical to the baseline (paths, kinds, modes, sizes, sha256, symlinks)"

step "the snapshots"
show ctrlz list

step "undo the rollback (the damage comes back), then redo it"
show ctrlz undo
test -L "$WS/src/lib" && test -f "$WS/junk.txt" || { echo "demo: FAILED: undo" >&2; exit 1; }
echo "OK: undo brought back the damaged state"
show ctrlz redo
fingerprint "$WS" > "$TMP/redo.txt"
diff -u "$TMP/before.txt" "$TMP/redo.txt" || { echo "demo: FAILED: redo" >&2; exit 1; }
echo "OK: redo restored the baseline again"

step "the store is sound"
show ctrlz verify

printf '\n%sdemo passed: snapshot, damage, diff, rollback, byte-identical, undo, redo%s\n' "$G" "$N"
