#!/usr/bin/env bash
# build-image.sh — the flashgate container image (Containerfile) with
# buildah, offline: builds the static binary on this machine, stages the
# build context (binary, CA bundle, one /etc/passwd line for uid 65532) and
# runs `buildah bud --isolation chroot` (no container is started, no base
# image pulled). Tags the image in buildah's storage and writes it as an OCI
# archive too (`podman load -i`, `skopeo copy oci-archive:… docker://…`).
#
# Usage: scripts/build-image.sh [ARCHIVE]     default build/flashgate-image.tar
# Environment:
#   VERSION   image and binary version (default: git describe --tags --always --dirty)
#   REVISION  commit (default: git rev-parse HEAD); CREATED defaults to its commit time
#   IMAGE     tag (default: localhost/flashgate:$VERSION)
#   BUILDAH_ROOT  a directory for buildah's storage (vfs) instead of the system's:
#             the test's throwaway store
#   GO        go command (default go)
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf 'build-image: %s\n' "$*" >&2; }

archive=${1:-build/flashgate-image.tar}
GO=${GO:-go}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
REVISION=${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
epoch=$(git log -1 --format=%ct "${REVISION}" 2>/dev/null || date +%s)
CREATED=${CREATED:-$(date -u -d "@${epoch}" +%Y-%m-%dT%H:%M:%SZ)}
IMAGE=${IMAGE:-localhost/flashgate:${VERSION}}

store=()
if [[ -n "${BUILDAH_ROOT:-}" ]]; then
	store=(--root "${BUILDAH_ROOT}/root" --runroot "${BUILDAH_ROOT}/run" --storage-driver vfs)
fi

ctx=$(mktemp -d)
trap 'rm -rf "${ctx}"' EXIT
CGO_ENABLED=0 "${GO}" build -trimpath \
	-ldflags "-s -w -X main.version=${VERSION}" -o "${ctx}/flashgate" ./cmd/flashgate
cp /etc/ssl/certs/ca-certificates.crt "${ctx}/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nflashgate:x:65532:65532:flashgate:/var/lib/flashgate:/sbin/nologin\n' >"${ctx}/passwd"
printf 'root:x:0:\nflashgate:x:65532:\n' >"${ctx}/group"
mkdir -p "${ctx}/var/lib/flashgate"
chmod 0700 "${ctx}/var/lib/flashgate"

log "building ${IMAGE} (version ${VERSION}, revision ${REVISION})"
buildah "${store[@]}" bud --quiet --isolation chroot --timestamp "${epoch}" \
	--build-arg "VERSION=${VERSION}" --build-arg "REVISION=${REVISION}" --build-arg "CREATED=${CREATED}" \
	-f Containerfile -t "${IMAGE}" "${ctx}" >/dev/null
mkdir -p "$(dirname "${archive}")"
rm -f "${archive}"
buildah "${store[@]}" push --quiet "${IMAGE}" "oci-archive:${archive}:${IMAGE}"
log "${IMAGE} -> ${archive} ($(du -h "${archive}" | cut -f1))"
