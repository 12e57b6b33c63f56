#!/usr/bin/env bash
# Builds the gate image offline: `checkpoint-runtime gate` (the render gate, with the chart and
# policies of this tree packaged in the wheel) for CI jobs, by build.sh's means (the Debian root
# filesystem of rootfs.lock, a wheelhouse of requirements-gate.lock's hashed pins, buildah), as
# docker.io/library/checkpoint-runtime-gate:<version>. Entrypoint ["checkpoint-runtime", "gate"],
# working directory /work (mount the checkout there), UID 10001. Cached by its inputs under
# ~/.cache/checkpoint-runtime/gate-image/<key>/; the LAST line of stdout is the archive's path.
exec env IMAGE_KIND=gate "$(dirname "${BASH_SOURCE[0]}")/build.sh" "$@"
