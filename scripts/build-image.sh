#!/usr/bin/env bash
# build-image.sh — the flashgate container image (Containerfile) with
# buildah, offline: cross-compiles the static binary on this machine for each
# platform (Go's own cross-compiler: no emulation, nothing is RUN in a
# container), stages one build context per platform (binary, CA bundle, one
# /etc/passwd line for uid 65532, LICENSE and NOTICE) and runs `buildah bud
# --platform … --isolation chroot` (no container is started, no base image
# pulled). The platforms' images go into one manifest list (an OCI image
# index) named IMAGE, also tagged as the Helm chart's default image
# (deploy/helm/flashgate: values.yaml image.repository, Chart.yaml appVersion),
# and written as an OCI archive (`skopeo copy --all oci-archive:… docker://…`).
#
# Usage: scripts/build-image.sh [ARCHIVE]     default build/flashgate-image.tar
# Environment:
#   VERSION   image and binary version (default: git describe --tags --always --dirty)
#   REVISION  commit (default: git rev-parse HEAD); CREATED defaults to its commit time
#   IMAGE     tag (default: localhost/flashgate:$VERSION)
#   PLATFORMS comma-separated (default linux/amd64,linux/arm64)
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
PLATFORMS=${PLATFORMS:-linux/amd64,linux/arm64}
# The chart's default image, so that a chart installed with its defaults
# runs what `make image` built (after a push to that repository).
chart=deploy/helm/flashgate
chart_repo=$(sed -n 's/^  repository: *\([^ #]*\).*/\1/p' "${chart}/values.yaml" | head -1)
chart_tag=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "${chart}/Chart.yaml")
CHART_IMAGE="${chart_repo}:${chart_tag}"

store=()
if [[ -n "${BUILDAH_ROOT:-}" ]]; then
	store=(--root "${BUILDAH_ROOT}/root" --runroot "${BUILDAH_ROOT}/run" --storage-driver vfs)
fi

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
# A manifest list of that name left by an earlier build would gain duplicates.
buildah "${store[@]}" manifest rm "${IMAGE}" >/dev/null 2>&1 || true
buildah "${store[@]}" rmi "${IMAGE}" >/dev/null 2>&1 || true
buildah "${store[@]}" manifest create "${IMAGE}" >/dev/null
IFS=, read -r -a platforms <<<"${PLATFORMS}"
for platform in "${platforms[@]}"; do
	os=${platform%%/*} arch=${platform#*/}
	ctx=${work}/${os}-${arch}
	mkdir -p "${ctx}/var/lib/flashgate"
	chmod 0700 "${ctx}/var/lib/flashgate"
	CGO_ENABLED=0 GOOS=${os} GOARCH=${arch} "${GO}" build -trimpath \
		-ldflags "-s -w -X main.version=${VERSION}" -o "${ctx}/flashgate" ./cmd/flashgate
	cp /etc/ssl/certs/ca-certificates.crt "${ctx}/ca-certificates.crt"
	cp LICENSE NOTICE "${ctx}/"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nflashgate:x:65532:65532:flashgate:/var/lib/flashgate:/sbin/nologin\n' >"${ctx}/passwd"
	printf 'root:x:0:\nflashgate:x:65532:\n' >"${ctx}/group"
	log "building ${IMAGE} for ${platform} (version ${VERSION}, revision ${REVISION})"
	buildah "${store[@]}" bud --quiet --isolation chroot --timestamp "${epoch}" --platform "${platform}" \
		--build-arg "VERSION=${VERSION}" --build-arg "REVISION=${REVISION}" --build-arg "CREATED=${CREATED}" \
		--manifest "${IMAGE}" -f Containerfile "${ctx}" >/dev/null
done
if [[ "${CHART_IMAGE}" != "${IMAGE}" ]]; then
	buildah "${store[@]}" manifest rm "${CHART_IMAGE}" >/dev/null 2>&1 || true
	buildah "${store[@]}" tag "${IMAGE}" "${CHART_IMAGE}"
	log "tagged ${CHART_IMAGE} (the chart's default image)"
fi
mkdir -p "$(dirname "${archive}")"
rm -f "${archive}"
buildah "${store[@]}" manifest push --quiet --all "${IMAGE}" "oci-archive:${archive}:${IMAGE}"
log "${IMAGE} (${PLATFORMS}) -> ${archive} ($(du -h "${archive}" | cut -f1))"
