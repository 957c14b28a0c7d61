#!/usr/bin/env bash
# Builds the release archives (make release): for each platform, under
# $DIST (default dist/), scimesh_VERSION_OS_ARCH.tar.gz holding the static
# binary (CGO_ENABLED=0), README.md and LICENSE, then SHA256SUMS over the
# archives. It replaces the archives and SHA256SUMS already there.
#
#   PLATFORMS  OS/ARCH list [linux/amd64 linux/arm64 darwin/amd64 darwin/arm64]
#   VERSION    [git describe --tags --always --dirty]
#   DIST       output directory [dist]
#
# Two runs on one commit give the same bytes: the build drops local paths
# (-trimpath) and the toolchain's VCS stamp (-buildvcs=false; the commit is
# stamped with -ldflags instead), and the archives have fixed modes, owners,
# order and times (SOURCE_DATE_EPOCH, the commit's time unless set) and a
# gzip header without a name or a time. GNU tar is required.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C # the order of globbed names

platforms=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
dist=${DIST:-dist}
commit=$(git rev-parse HEAD)
version=${VERSION:-$(git describe --tags --always --dirty)}
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}

# The version is part of file names, where "_" separates the fields.
if ! [[ $version =~ ^[A-Za-z0-9][A-Za-z0-9.+-]*$ ]]; then
	echo "tools/release.sh: VERSION $version: use letters, digits, '.', '+' and '-' only" >&2
	exit 2
fi
tar=tar
if ! tar --version 2>/dev/null | grep -q 'GNU tar'; then
	tar=gtar
	command -v gtar >/dev/null || { echo "tools/release.sh: GNU tar is needed (tar --sort, --mtime, --owner)" >&2; exit 1; }
fi
for p in $platforms; do
	case $p in
	linux/amd64 | linux/arm64 | darwin/amd64 | darwin/arm64) ;;
	*) echo "tools/release.sh: platform $p: choose among linux/amd64 linux/arm64 darwin/amd64 darwin/arm64" >&2; exit 2 ;;
	esac
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$dist"
rm -f "$dist"/scimesh_*.tar.gz "$dist/SHA256SUMS"

for p in $platforms; do
	os=${p%/*} arch=${p#*/}
	dir=$stage/${os}_$arch
	mkdir "$dir"
	echo "building scimesh $version for $os/$arch" >&2
	# GOFLAGS is set, not unset, so that flags from `go env -w` cannot
	# change the build; GOAMD64 and GOARM64 are the toolchain's defaults.
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch GOAMD64=v1 GOARM64=v8.0 GOFLAGS=-mod=readonly \
		go build -trimpath -buildvcs=false \
		-ldflags "-s -w -X main.version=$version -X main.commit=$commit" \
		-o "$dir/scimesh" ./cmd/scimesh
	chmod 0755 "$dir/scimesh"
	install -m 0644 README.md LICENSE "$dir/"
	"$tar" --create --format=ustar --sort=name --mtime="@$epoch" \
		--owner=0 --group=0 --numeric-owner --directory="$dir" \
		scimesh README.md LICENSE |
		gzip -9 -n >"$dist/scimesh_${version}_${os}_${arch}.tar.gz"
done

(cd "$dist" && sha256sum scimesh_*.tar.gz >SHA256SUMS)
echo "wrote $dist:" >&2
cat "$dist/SHA256SUMS" >&2
