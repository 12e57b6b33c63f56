#!/usr/bin/env bash
# Prints the replace block for go.mod: every k8s.io/* staging module that the pinned
# k8s.io/kubernetes (versions.env, or the version given as the argument) replaces with a local
# path, pointed at its published v0.N.x instead.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
version=${1:-$KUBERNETES_VERSION}
gomod=$(cd "$here" && go mod download -json "k8s.io/kubernetes@${version}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
staging="v0.${version#v1.}"
echo "replace ("
sed -n '/^replace (/,/^)/p' "$gomod" | awk -v v="$staging" '/=> \.\/staging/ {print "\t" $1 " => " $1 " " v}'
echo ")"
