#!/usr/bin/env bash
# Builds the Temporal server (the distributed tier of the tests) from the Go
# module proxy into $AML_TEMPORAL_DIR (default ~/.cache/aml-temporal), once:
# about 15 minutes on 2 cores, 160 MB. The Temporal CLI does not build from
# the proxy, so the tests start this server with SQLite on loopback
# themselves (internal/temporaltest). It is built from the module's own
# directory, with the module's own go.mod, outside this repository's.
set -euo pipefail
version=${AML_TEMPORAL_VERSION:-v1.32.0}
dir=${AML_TEMPORAL_DIR:-$HOME/.cache/aml-temporal}
if [[ -x $dir/temporal-server ]]; then echo "temporal-server: cached in $dir"; exit 0; fi
mkdir -p "$dir"
src=$(go mod download -json "go.temporal.io/server@$version" | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
echo "building temporal-server $version from $src into $dir (about 15 minutes, once)"
(cd "$src" && go build -trimpath -o "$dir/temporal-server.tmp" ./cmd/server)
rm -rf "$dir/dynamicconfig"
cp -r "$src/config/dynamicconfig" "$dir/dynamicconfig"
chmod -R u+w "$dir/dynamicconfig"
mv "$dir/temporal-server.tmp" "$dir/temporal-server"
echo "temporal-server $version: built in $dir"
