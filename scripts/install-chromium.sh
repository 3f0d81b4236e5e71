#!/usr/bin/env bash
# install-chromium.sh — Debian's Chromium for the browser end-to-end test
# (examples/browser). playwright-core drives it; Playwright's own browser
# downloads are not reachable, so the browser comes from apt.
#
# Usage: scripts/install-chromium.sh   install if /usr/bin/chromium is missing
set -euo pipefail

bin=/usr/bin/chromium
log() { printf 'install-chromium: %s\n' "$*" >&2; }

if [[ -x "${bin}" ]]; then
	exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
	log "${bin} is missing; install it as root:  apt-get update && apt-get install -y chromium"
	exit 1
fi
log "installing chromium"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y chromium >&2; then
	apt-get update >&2
	apt-get install -y chromium >&2
fi
[[ -x "${bin}" ]] || { log "${bin} is still missing after apt-get install chromium"; exit 1; }
