#!/usr/bin/env bash
# install-buildah.sh: installs Debian's buildah (builds the container image of
# make image without a Docker engine or a running container) and
# ca-certificates (the CA bundle the image carries) with apt-get when either
# is missing; does nothing when both are there. Uses sudo only when not root.
set -euo pipefail
if command -v buildah >/dev/null && [ -s /etc/ssl/certs/ca-certificates.crt ]; then
  exit 0
fi
sudo=
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "install-buildah.sh: buildah is missing and this is not root (no sudo): apt-get install -y buildah ca-certificates" >&2; exit 1; }
  sudo=sudo
fi
echo "install-buildah.sh: installing buildah ca-certificates (apt)" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y -qq buildah ca-certificates >/dev/null || { $sudo apt-get update -qq && $sudo apt-get install -y -qq buildah ca-certificates >/dev/null; }
command -v buildah >/dev/null || { echo "install-buildah.sh: buildah is still not on PATH" >&2; exit 1; }
