#!/usr/bin/env bash
# verify-codegen.sh checks that the generated code and CRDs are up to date:
# it copies the repository (the files git knows of, tracked or not ignored,
# plus the generated directories) into a temporary directory, runs
# hack/update-codegen.sh there, and compares pkg/apis, pkg/generated,
# manifests/crds and docs (the API reference docs/api.md) with the
# original. Any difference is printed as a diff and
# makes it exit 1; run hack/update-codegen.sh to fix it. The original tree is
# never written to.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHECKED=(pkg/apis pkg/generated manifests/crds docs)

TMP="$(mktemp -d "${TMPDIR:-/tmp}/verify-codegen.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
COPY="$TMP/repo"
mkdir -p "$COPY"

cd "$ROOT"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Tracked files and untracked ones that are not ignored, as they are in the
  # working tree (a tracked file deleted there is skipped).
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do
      [ -f "$f" ] && printf '%s\0' "$f"
    done |
    tar --null -T - -cf - | tar -xf - -C "$COPY"
else
  tar --exclude=./.git -cf - . | tar -xf - -C "$COPY"
fi
# The generated directories, even if ignored or untracked.
for d in "${CHECKED[@]}"; do
  if [ -d "$ROOT/$d" ]; then
    mkdir -p "$COPY/$d"
    (cd "$ROOT/$d" && tar -cf - .) | tar -xf - -C "$COPY/$d"
  fi
done

echo "verify-codegen: regenerating in $COPY" >&2
if ! (cd "$COPY" && bash hack/update-codegen.sh) >"$TMP/update-codegen.log" 2>&1; then
  cat "$TMP/update-codegen.log" >&2
  echo "verify-codegen: hack/update-codegen.sh failed" >&2
  exit 1
fi

status=0
for d in "${CHECKED[@]}"; do
  # diff -N shows files only one side has (added or stale generated files).
  if ! diff -ruN "$ROOT/$d" "$COPY/$d" >"$TMP/diff" 2>&1; then
    sed -e "s|$ROOT/|a/|g" -e "s|$COPY/|b/|g" "$TMP/diff"
    status=1
  fi
done

if [ "$status" -ne 0 ]; then
  echo "verify-codegen: generated code is out of date (a/ is the tree, b/ regenerated): run hack/update-codegen.sh" >&2
  exit 1
fi
echo "verify-codegen: ${CHECKED[*]} are up to date" >&2
