#!/usr/bin/env bash
# Builds the release artefacts that .goreleaser.yaml describes, with the
# Go toolchain alone: static, stripped binaries of ./cmd/aml and its
# companion ./cmd/aml-full for linux and
# darwin on amd64 and arm64 (-trimpath, CGO_ENABLED=0, the version linked
# into main.version), one tar.gz per target with the LICENSE, README and
# CHANGELOG, and checksums.txt (SHA-256). Prints each binary's size.
#
#   scripts/release.sh v1.2.3      a release of that tag, into dist/
#   scripts/release.sh --snapshot  the same from the working tree, versioned
#                                  after the last tag (CI runs this)
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)

if [[ ${1:-} == --snapshot ]]; then
  last=$(git describe --tags --abbrev=0 2>/dev/null || echo v0.0.0)
  rev=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  version="${last#v}-next+${rev}"
elif [[ ${1:-} =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]]; then
  version="${1#v}"
else
  echo "usage: scripts/release.sh vX.Y.Z | --snapshot" >&2
  exit 2
fi

dist=dist
rm -rf "$dist"
mkdir -p "$dist"
for t in "${targets[@]}"; do
  os=${t%/*} arch=${t#*/}
  name="aml_${version}_${os}_${arch}"
  dir="$dist/$name"
  mkdir -p "$dir"
  for cmd in aml aml-full; do
    CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$dir/$cmd" "./cmd/$cmd"
  done
  cp LICENSE README.md CHANGELOG.md "$dir/"
  tar -C "$dir" -czf "$dist/$name.tar.gz" aml aml-full LICENSE README.md CHANGELOG.md
  mb() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.1f", b / 1048576 }'; }
  printf '%-16s aml %s MB, aml-full %s MB\n' "$t" "$(mb "$dir/aml")" "$(mb "$dir/aml-full")"
done
(cd "$dist" && sha256sum ./*.tar.gz | sed 's| \./| |' > checksums.txt)
echo "wrote $dist/checksums.txt and $(ls "$dist"/*.tar.gz | wc -l) archives, version $version"
