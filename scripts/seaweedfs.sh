#!/usr/bin/env bash
# Builds SeaweedFS's weed (the heavy S3 tier of the tests) from the Go
# module proxy into $AML_SEAWEEDFS_DIR (default ~/.cache/aml-seaweedfs),
# once: about 12 minutes on 2 cores. `go install` refuses the module (its
# go.mod has replace directives), so it builds from the module's directory.
set -euo pipefail
dir=${AML_SEAWEEDFS_DIR:-$HOME/.cache/aml-seaweedfs}
if [[ -x $dir/weed ]]; then echo "weed: cached in $dir"; exit 0; fi
mkdir -p "$dir"
src=$(go mod download -json github.com/seaweedfs/seaweedfs@latest | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
echo "building weed from $src into $dir (about 12 minutes, once)"
(cd "$src" && go build -o "$dir/weed.tmp" ./weed)
mv "$dir/weed.tmp" "$dir/weed"
"$dir/weed" version
