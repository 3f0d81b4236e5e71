#!/usr/bin/env bash
# install-proxies.sh — Debian's nginx and HAProxy for the proxy matrix
# (server/proxies_test.go: hostile X-Forwarded-For and Forwarded headers sent
# through each real proxy in front of the server, issue 31 §2). The tests
# start their own instances on loopback with their own configuration; the
# packages' system services are not used (nor started, when we install them).
#
# Usage: scripts/install-proxies.sh   install whichever of nginx, haproxy is missing
set -euo pipefail

log() { printf 'install-proxies: %s\n' "$*" >&2; }

missing=()
[[ -x /usr/sbin/nginx ]] || missing+=(nginx)
[[ -x /usr/sbin/haproxy ]] || missing+=(haproxy)
if [[ ${#missing[@]} -eq 0 ]]; then
	exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
	log "missing; install as root:  apt-get update && apt-get install -y ${missing[*]}"
	exit 1
fi
log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# policy-rc.d 101: the packages' postinst does not start the system services
# (port 80 may be taken, and the tests run their own instances).
policy=/usr/sbin/policy-rc.d
own_policy=0
if [[ ! -e "${policy}" ]]; then
	printf '#!/bin/sh\nexit 101\n' >"${policy}"
	chmod +x "${policy}"
	own_policy=1
fi
trap '[[ ${own_policy} == 1 ]] && rm -f "${policy}"' EXIT
if ! apt-get install -y --no-install-recommends "${missing[@]}" >&2; then
	apt-get update >&2
	apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi
for bin in /usr/sbin/nginx /usr/sbin/haproxy; do
	[[ -x "${bin}" ]] || { log "${bin} is still missing after apt-get install"; exit 1; }
done
