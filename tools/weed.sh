#!/usr/bin/env bash
# Builds SeaweedFS's weed, the S3-compatible store the tests run against
# (internal/s3test), once per machine: the binary is kept outside the
# clone, at $SCIMESH_WEED (default /var/cache/scimesh/weed), and this
# script does nothing when it is already there. It builds from the Go
# module proxy (go install refuses the module: its go.mod has replace
# directives); about 3 to 6 minutes on 2 cores.
set -euo pipefail
version=v0.0.0-20261109003541-7506e5f91cd6
out=${SCIMESH_WEED:-/var/cache/scimesh/weed}
stamp=$out.version
if [ -x "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
	exit 0
fi
mkdir -p "$(dirname "$out")"
src=$(mktemp -d)
trap 'chmod -R u+w "$src"; rm -rf "$src"' EXIT
dir=$(go mod download -json "github.com/seaweedfs/seaweedfs@$version" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
[ -n "$dir" ] || { echo "tools/weed.sh: the module proxy did not give github.com/seaweedfs/seaweedfs@$version" >&2; exit 1; }
cp -r "$dir/." "$src"
chmod -R u+w "$src"
echo "building weed $version into $out" >&2
(cd "$src" && go build -o "$out.tmp" ./weed)
mv "$out.tmp" "$out"
echo "$version" >"$stamp"
