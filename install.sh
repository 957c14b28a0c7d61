#!/bin/sh
# Installs the scimesh binary for this machine from a release:
#
#   curl -fsSL https://github.com/scimesh/scimesh/releases/latest/download/install.sh | sh
#
# It reads SHA256SUMS at SCIMESH_RELEASE_BASE, downloads the archive listed
# there for this OS and architecture, checks it against its checksum, and
# installs the binary into SCIMESH_INSTALL_DIR. On a checksum mismatch it
# installs nothing.
#
#   SCIMESH_RELEASE_BASE  [https://github.com/scimesh/scimesh/releases/latest/download]
#   SCIMESH_INSTALL_DIR   [~/.local/bin]
#
# POSIX sh. It needs curl or wget, sha256sum or shasum, tar and gzip.
set -eu

fail() {
	echo "install.sh: $*" >&2
	exit 1
}

# download URL FILE
download() {
	if command -v curl >/dev/null 2>&1; then
		curl -fsSL -o "$2" "$1" || fail "could not download $1"
	elif command -v wget >/dev/null 2>&1; then
		wget -q -O "$2" "$1" || fail "could not download $1"
	else
		fail "curl or wget is needed to download $1"
	fi
}

# sha256 FILE prints the file's SHA-256 in hex.
sha256() {
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum "$1" | cut -d ' ' -f 1
	elif command -v shasum >/dev/null 2>&1; then
		shasum -a 256 "$1" | cut -d ' ' -f 1
	else
		fail "sha256sum or shasum is needed to check the download"
	fi
}

platform() {
	case $(uname -s) in
	Linux) os=linux ;;
	Darwin) os=darwin ;;
	*) fail "no release for $(uname -s): build from source (see README.md)" ;;
	esac
	case $(uname -m) in
	x86_64 | amd64) arch=amd64 ;;
	aarch64 | arm64) arch=arm64 ;;
	*) fail "no release for $(uname -m): build from source (see README.md)" ;;
	esac
	echo "${os}_$arch"
}

# The whole script is this function, called on its last line, so that a
# download cut short by the network runs nothing.
main() {
	base=${SCIMESH_RELEASE_BASE:-https://github.com/scimesh/scimesh/releases/latest/download}
	base=${base%/}
	dir=${SCIMESH_INSTALL_DIR:-$HOME/.local/bin}
	plat=$(platform)

	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	trap 'exit 1' HUP INT TERM

	download "$base/SHA256SUMS" "$tmp/SHA256SUMS"
	# A line of SHA256SUMS: HASH, two spaces, scimesh_VERSION_OS_ARCH.tar.gz.
	line=$(grep -E "^[0-9a-f]{64}  scimesh_[A-Za-z0-9.+-]+_${plat}\.tar\.gz\$" "$tmp/SHA256SUMS" | head -n 1)
	[ -n "$line" ] || fail "$base/SHA256SUMS lists no archive for $plat"
	want=${line%% *}
	archive=${line##* }

	download "$base/$archive" "$tmp/$archive"
	got=$(sha256 "$tmp/$archive")
	if [ "$got" != "$want" ]; then
		fail "checksum mismatch for $archive: SHA256SUMS says $want, the download is $got. Nothing was installed."
	fi

	mkdir "$tmp/x"
	tar -xzf "$tmp/$archive" -C "$tmp/x" scimesh || fail "$archive holds no scimesh binary"
	mkdir -p "$dir"
	# Copy beside the target, then rename: a running scimesh is not
	# overwritten in place, and an interrupted copy leaves the old one.
	cp "$tmp/x/scimesh" "$dir/.scimesh.install.$$"
	chmod 0755 "$dir/.scimesh.install.$$"
	mv -f "$dir/.scimesh.install.$$" "$dir/scimesh"

	version=${archive#scimesh_}
	version=${version%_"$plat".tar.gz}
	echo "Installed scimesh $version into $dir/scimesh."
	case :$PATH: in
	*:"$dir":*)
		echo "Next, run the demo: scimesh demo"
		;;
	*)
		echo "$dir is not on your PATH. Add it, for example in ~/.profile:"
		echo "  export PATH=\"$dir:\$PATH\""
		echo "Next, run the demo: $dir/scimesh demo"
		;;
	esac
}

main "$@"
