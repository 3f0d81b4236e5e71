#!/usr/bin/env bash
# install-origins.sh — the real origins the example worker's path matrix runs
# in front of (examples/cloudflare-worker/origins_test.go): Debian's nginx,
# python3-flask and python3-django (for Debian's /usr/bin/python3). Express
# comes from npm (examples/cloudflare-worker/testdata/origins/express,
# `npm ci`, pinned by its package-lock.json).
#
# Usage: scripts/install-origins.sh   install whatever is missing
set -euo pipefail

log() { printf 'install-origins: %s\n' "$*" >&2; }

missing=()
[[ -x /usr/sbin/nginx ]] || missing+=(nginx)
/usr/bin/python3 -c 'import flask' 2>/dev/null || missing+=(python3-flask)
/usr/bin/python3 -c 'import django' 2>/dev/null || missing+=(python3-django)
if [[ ${#missing[@]} -eq 0 ]]; then
	exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
	log "missing ${missing[*]}; install as root:  apt-get update && apt-get install -y ${missing[*]}"
	exit 1
fi
log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y "${missing[@]}" >&2; then
	apt-get update >&2
	apt-get install -y "${missing[@]}" >&2
fi
[[ -x /usr/sbin/nginx ]] || { log "/usr/sbin/nginx is still missing"; exit 1; }
/usr/bin/python3 -c 'import flask, django' || { log "flask or django still missing for /usr/bin/python3"; exit 1; }
