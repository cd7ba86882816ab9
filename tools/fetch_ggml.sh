#!/usr/bin/env bash
# Fetches ggml, the tensor library of llama.cpp, whose CPU flash attention the suite times as a
# peer (kernels/ggml.cpp), into build/deps/ggml (git-ignored; CMake builds it from there).
# The llama.cpp source comes from the npm registry: the package node-llama-cpp carries the
# release it binds as a git bundle (llama/gitRelease.bundle). The package's sha512 is checked
# against the pinned one and the bundle's commit against the pinned commit; only ggml/ (and the
# licence) is kept. Idempotent: nothing is fetched when build/deps/ggml has the pinned commit.
# Without npm, or when the registry cannot be reached, it says so in one line and exits 0: the
# build then leaves the ggml entries out.
#
# To move to another release: set the three pins below from `npm view node-llama-cpp@VERSION
# dist.integrity` and the commit `git bundle list-heads` prints for its bundle, then rerun.
set -euo pipefail

version=3.22.1
integrity=sha512-bltIipuWmc123H7tMIgDGKSsSrhmhlQYeVUC48XTjVW7XGJJiJJyCdlTMzQ/LiWoPkGDpcL4FviDpgw7qfTiDw==
commit=de3ff815ea7d559ee917f063901b8986f038abc6

cd "$(dirname "$0")/.."
dest=build/deps/ggml
stamp="$dest/RELEASE"
[[ -f "$stamp" ]] && grep -q "$commit" "$stamp" && exit 0

skip() {
  echo "fetch_ggml: $1; the ggml entries will be absent" >&2
  exit 0
}
command -v npm >/dev/null || skip "npm not found"

mkdir -p build
work=$(mktemp -d build/deps.XXXXXX)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "node-llama-cpp@$version" >/dev/null 2>&1) ||
  skip "npm pack node-llama-cpp@$version failed"
tarball="$work/node-llama-cpp-$version.tgz"
# The pinned integrity is base64 of the sha512; compare it as hex with sha512sum's.
want=$(echo "${integrity#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')
got=$(sha512sum "$tarball" | cut -d' ' -f1)
if [[ "$got" != "$want" ]]; then
  echo "fetch_ggml: node-llama-cpp-$version.tgz has sha512 $got, pinned $want" >&2
  exit 1
fi

tar -xzf "$tarball" -C "$work" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
git clone --quiet --bare "$work/package/llama/gitRelease.bundle" "$work/llama.cpp.git"
head=$(git --git-dir="$work/llama.cpp.git" rev-parse HEAD)
if [[ "$head" != "$commit" ]]; then
  echo "fetch_ggml: the bundle of node-llama-cpp@$version is at $head, pinned $commit" >&2
  exit 1
fi
tag=$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$work/package/llama/llama.cpp.info.json")

rm -rf "$dest"
mkdir -p "$dest"
git --git-dir="$work/llama.cpp.git" archive "$commit" ggml LICENSE | tar -x -C "$dest"
echo "llama.cpp $tag $commit (npm node-llama-cpp@$version)" >"$stamp"
echo "fetch_ggml: $(cat "$stamp") in $dest" >&2
