#!/usr/bin/env bash
# install-wrk.sh: installs Debian's wrk (the HTTP load generator of
# make bench-http and make bench-edge) with apt-get when `wrk` is not on PATH;
# does nothing when it is. Uses sudo only when not run as root.
set -euo pipefail
if command -v wrk >/dev/null; then
  exit 0
fi
sudo=
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "install-wrk.sh: wrk is missing and this is not root (no sudo): apt-get install -y wrk" >&2; exit 1; }
  sudo=sudo
fi
echo "install-wrk.sh: installing wrk (apt)" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y -qq wrk >/dev/null || { $sudo apt-get update -qq && $sudo apt-get install -y -qq wrk >/dev/null; }
command -v wrk >/dev/null || { echo "install-wrk.sh: wrk is still not on PATH" >&2; exit 1; }
