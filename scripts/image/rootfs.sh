#!/usr/bin/env bash
# The image's Debian bookworm root filesystem as a tarball: mmdebstrap --variant=minbase plus the
# pinned packages of rootfs-packages.txt, from this host's Debian apt sources, without docs, man
# pages, info pages or locales (copyright files stay). Cached under CACHE_DIR/<key>/ by a hash of
# the pins, the sources, this script and SOURCE_DATE_EPOCH; prints the tarball's path.
# Usage: rootfs.sh CACHE_DIR
# Called by build.sh, which holds the image lock.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${1:?usage: rootfs.sh CACHE_DIR}
log() { echo "image: $*" >&2; }

sources=${DEBIAN_SOURCES:-/etc/apt/sources.list.d/debian.sources}
[[ -f $sources ]] || sources=/etc/apt/sources.list
[[ -f $sources ]] || {
  log "no Debian apt sources at $sources; set DEBIAN_SOURCES to a sources.list or .sources file"
  exit 1
}
mapfile -t pins < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$here/rootfs-packages.txt" | grep -v '^$')
# mmdebstrap's SOURCE_DATE_EPOCH (the time of its files and logs, its reproducible mode): the
# newest commit that changed the pins or this script, else the caller's.
epoch=$(git -C "$here" log -1 --format=%ct -- rootfs.sh rootfs-packages.txt 2>/dev/null || true)
export SOURCE_DATE_EPOCH=${epoch:-${SOURCE_DATE_EPOCH:-0}}
key=$({ cat "$here/rootfs-packages.txt" "$sources" "${BASH_SOURCE[0]}"; echo "$SOURCE_DATE_EPOCH"; } |
  sha256sum | cut -c1-16)
tarball=$cache/$key/rootfs.tar
if [[ -f $tarball ]]; then
  log "Debian root filesystem cached ($tarball)"
  echo "$tarball"
  exit 0
fi

log "building the Debian bookworm root filesystem with mmdebstrap (${#pins[@]} pinned packages;" \
  "a few minutes: it downloads about 40 MB of packages)"
mkdir -p "$cache/$key"
partial=$cache/$key/rootfs.partial-$$.tar
trap 'rm -f "$partial"' EXIT
include=$(
  IFS=,
  echo "${pins[*]}"
)
if ! mmdebstrap --variant=minbase --include="$include" \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/lintian/*' \
  bookworm "$partial" "$sources" >&2; then
  log "mmdebstrap failed; if a pinned version is no longer served, update" \
    "$here/rootfs-packages.txt"
  exit 1
fi
mv "$partial" "$tarball"
echo "$tarball"
