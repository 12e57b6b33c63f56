#!/usr/bin/env bash
# Installs the pinned Debian packages of debian-packages.txt that are missing or at another
# version. Idempotent: prints one line and exits when everything is already there.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$here/debian-packages.txt" | grep -v '^$')

missing=()
for pin in "${wanted[@]}"; do
  name=${pin%%=*}
  have=$(dpkg-query -W -f='${db:Status-Abbrev}${Version}' "$name" 2>/dev/null || true)
  [[ $have == "ii ${pin#*=}" ]] || missing+=("$pin")
done
if ((${#missing[@]} == 0)); then
  echo "system: ${#wanted[@]} pinned Debian packages present" >&2
  exit 0
fi

command -v apt-get >/dev/null || {
  echo "system: apt-get not found; install these Debian bookworm packages: ${missing[*]}" >&2
  exit 1
}
sudo=()
((EUID == 0)) || sudo=(sudo)
echo "system: installing ${#missing[@]} Debian package(s): ${missing[*]}" >&2
"${sudo[@]}" apt-get update -qq
if ! DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" >&2; then
  echo "system: apt-get could not install the pins above; if Debian has moved a package to a" \
    "newer point release, update its line in $here/debian-packages.txt" >&2
  exit 1
fi
echo "system: Debian packages installed" >&2
