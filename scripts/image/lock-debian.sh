#!/usr/bin/env bash
# Writes scripts/image/rootfs.lock: every Debian package of the image's root filesystem by name,
# version, architecture and the SHA-256 of its .deb, with the URL apt fetched it from.
# It resolves what rootfs.sh installs (mmdebstrap --variant=minbase plus the pins of
# rootfs-packages.txt) against the Debian sources of the day (DEBIAN_SOURCES, default this
# host's), records what landed in that root filesystem and the SHA-256 the archive's signed
# index gives for each .deb, then downloads every .deb into the cache
# (~/.cache/checkpoint-runtime/debs/<sha256>.deb) and checks it. rootfs.sh installs from those
# files only. Run it (`just lock-debian`, as root) after changing rootfs-packages.txt, or to
# take Debian's updates; never edit the lock by hand.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
[[ -x $python ]] || python=python3
debs=${XDG_CACHE_HOME:-$HOME/.cache}/checkpoint-runtime/debs
log() { echo "lock-debian: $*" >&2; }

sources=${DEBIAN_SOURCES:-/etc/apt/sources.list.d/debian.sources}
[[ -f $sources ]] || sources=/etc/apt/sources.list
[[ -f $sources ]] || {
  log "no Debian apt sources at $sources; set DEBIAN_SOURCES to a sources.list or .sources file"
  exit 1
}
mapfile -t pins < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$here/rootfs-packages.txt" | grep -v '^$')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
include=$(
  IFS=,
  echo "${pins[*]}"
)
log "resolving minbase + ${#pins[@]} pins of rootfs-packages.txt against $sources (mmdebstrap)"
mmdebstrap --variant=minbase --include="$include" \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --customize-hook="chroot \"\$1\" dpkg-query -W -f='\${Package} \${Version} \${Architecture}\n' >$work/installed" \
  --customize-hook="chroot \"\$1\" sh -c 'apt-get download --print-uris \$(dpkg-query -W -f=\"\\\${Package}=\\\${Version} \")' >$work/uris" \
  bookworm /dev/null "$sources" >&2
"$python" "$here/debs.py" lock "$here/rootfs-packages.txt" "$work/installed" "$work/uris" \
  "$here/rootfs.lock"
log "downloading and checking every .deb of the lock into $debs"
"$python" "$here/debs.py" repo "$here/rootfs.lock" "$debs" "$work/repo" >/dev/null
log "done: $(grep -c '^[a-z0-9]' "$here/rootfs.lock") packages in ${here#"$root/"}/rootfs.lock"
