#!/usr/bin/env bash
# install-chromium.sh — Debian's Chromium for the browser end-to-end test
# (examples/browser). playwright-core drives it; Playwright's own browser
# downloads are not reachable, so the browser comes from apt.
#
# The waiting page's screenshots and axe-core checks render Chinese, Japanese
# and Korean text: fonts-droid-fallback (1.8 MB) covers CJK; DejaVu (a
# Chromium dependency) covers Arabic and Hebrew.
#
# Usage: scripts/install-chromium.sh   install if /usr/bin/chromium or the CJK font is missing
set -euo pipefail

bin=/usr/bin/chromium
log() { printf 'install-chromium: %s\n' "$*" >&2; }

fonts=fonts-droid-fallback
if [[ -x "${bin}" ]] && dpkg -s "${fonts}" >/dev/null 2>&1; then
	exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
	log "${bin} or ${fonts} is missing; install them as root:  apt-get update && apt-get install -y chromium ${fonts}"
	exit 1
fi
log "installing chromium ${fonts}"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y chromium "${fonts}" >&2; then
	apt-get update >&2
	apt-get install -y chromium "${fonts}" >&2
fi
[[ -x "${bin}" ]] || { log "${bin} is still missing after apt-get install chromium"; exit 1; }
