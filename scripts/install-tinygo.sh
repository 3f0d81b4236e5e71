#!/usr/bin/env bash
# install-tinygo.sh — build (once) and cache the TinyGo toolchain used for the
# flashgate wasm verifier (wasm/, scripts/build-wasm.sh).
#
# Why not a release tarball: only the Go module proxy, Debian apt and npm are
# reachable. TinyGo v0.41.0 is the only release that accepts Go 1.26, and
# `go install` cannot be used (the proxy refuses to list its versions), so the
# module source is downloaded with `go mod download` and built against
# Debian's LLVM 19. The module lacks the git submodules (lib/wasi-libc,
# compiler-rt sources, …), so wasm builds use our own target
# wasm/target/flashgate-wasm.json, which links Debian's prebuilt wasi-libc and
# compiler-rt builtins instead.
#
# Usage:
#   scripts/install-tinygo.sh               install if needed; last stdout line = tinygo path
#   scripts/install-tinygo.sh --print-path  print the tinygo path only; exit 1 if not installed
#   scripts/install-tinygo.sh --check       exit 0 if installed and working, else 1 (silent)
#
# Environment:
#   FLASHGATE_TOOLCHAIN_DIR  cache root (default $HOME/.cache/flashgate)
#
# The toolchain lives outside the work tree, in
#   $FLASHGATE_TOOLCHAIN_DIR/tinygo-v0.41.0/          (TINYGOROOT)
#   $FLASHGATE_TOOLCHAIN_DIR/tinygo-v0.41.0/build/tinygo
# Callers run it with TINYGOROOT set to that directory (scripts/build-wasm.sh
# does). Nothing is exported to the caller's environment.
set -euo pipefail

TINYGO_VERSION=v0.41.0
LLVM_MAJOR=19
APT_PACKAGES=(
	"llvm-${LLVM_MAJOR}-dev" "clang-${LLVM_MAJOR}" "lld-${LLVM_MAJOR}" "libclang-${LLVM_MAJOR}-dev"
	wasi-libc "libclang-rt-${LLVM_MAJOR}-dev-wasm32" binaryen
)
# Files the flashgate target (wasm/target/flashgate-wasm.json) links or runs.
REQUIRED_FILES=(
	/usr/lib/wasm32-wasi/libc.a
	"/usr/lib/llvm-${LLVM_MAJOR}/lib/clang/${LLVM_MAJOR}/lib/wasi/libclang_rt.builtins-wasm32.a"
	"/usr/lib/llvm-${LLVM_MAJOR}/bin/llvm-config"
	"/usr/bin/wasm-ld-${LLVM_MAJOR}"
)

toolchain_root="${FLASHGATE_TOOLCHAIN_DIR:-${HOME}/.cache/flashgate}"
dir="${toolchain_root}/tinygo-${TINYGO_VERSION}"
tinygo="${dir}/build/tinygo"

log() { printf 'install-tinygo: %s\n' "$*" >&2; }

works() {
	[[ -x "${tinygo}" ]] && TINYGOROOT="${dir}" "${tinygo}" version >/dev/null 2>&1
}

case "${1:-}" in
--print-path)
	if works; then
		printf '%s\n' "${tinygo}"
		exit 0
	fi
	log "TinyGo ${TINYGO_VERSION} is not installed in ${dir}; run scripts/install-tinygo.sh"
	exit 1
	;;
--check)
	works
	exit $?
	;;
"") ;;
*)
	log "usage: $0 [--print-path|--check]"
	exit 2
	;;
esac

# ---- 1. system packages -----------------------------------------------------
missing_pkgs=()
for p in "${APT_PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing_pkgs+=("$p")
	fi
done
if ((${#missing_pkgs[@]} > 0)); then
	if [[ "$(id -u)" != 0 ]]; then
		log "missing Debian packages: ${missing_pkgs[*]}"
		log "install them as root:  apt-get update && apt-get install -y ${missing_pkgs[*]}"
		exit 1
	fi
	log "installing ${missing_pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends "${missing_pkgs[@]}" >&2; then
		apt-get update >&2
		apt-get install -y --no-install-recommends "${missing_pkgs[@]}" >&2
	fi
fi
for f in "${REQUIRED_FILES[@]}"; do
	if [[ ! -e "$f" ]]; then
		log "expected file $f is missing after installing ${APT_PACKAGES[*]}"
		exit 1
	fi
done

# ---- 2. TinyGo itself --------------------------------------------------------
if works; then
	log "TinyGo ${TINYGO_VERSION} already installed (TINYGOROOT=${dir})"
	printf '%s\n' "${tinygo}"
	exit 0
fi

command -v go >/dev/null || { log "go is not on PATH"; exit 1; }

# Run outside any module so the project's go.mod/go.sum are never touched.
src="$(cd / && go mod download -json "github.com/tinygo-org/tinygo@${TINYGO_VERSION}" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [[ -z "${src}" || ! -d "${src}" ]]; then
	log "go mod download github.com/tinygo-org/tinygo@${TINYGO_VERSION} gave no module directory"
	exit 1
fi

mkdir -p "${toolchain_root}"
staging="$(mktemp -d "${toolchain_root}/.tinygo-${TINYGO_VERSION}.XXXXXX")"
trap 'rm -rf "${staging}"' EXIT
log "copying ${src} -> ${staging}"
cp -r "${src}/." "${staging}/"
chmod -R u+w "${staging}"
# src/net is a git submodule upstream; the module zip lacks it. An empty
# directory is enough for code that does not import net.
mkdir -p "${staging}/src/net"

log "building tinygo (go build -tags=llvm${LLVM_MAJOR}); this takes a few minutes"
start=$(date +%s)
(
	cd "${staging}"
	export PATH="/usr/lib/llvm-${LLVM_MAJOR}/bin:${PATH}"
	CGO_ENABLED=1 GOFLAGS=-mod=mod go build -tags="llvm${LLVM_MAJOR}" -o build/tinygo . >&2
)
log "built in $(($(date +%s) - start)) s"

# The build trees hard-code nothing about their location (TINYGOROOT is
# passed at run time), so the staging directory can simply be moved in place.
rm -rf "${dir}"
mv "${staging}" "${dir}"
trap - EXIT

if ! works; then
	log "built ${tinygo} but 'tinygo version' fails:"
	TINYGOROOT="${dir}" "${tinygo}" version >&2 || true
	exit 1
fi
log "installed: $(TINYGOROOT="${dir}" "${tinygo}" version)"
log "TINYGOROOT=${dir}"
printf '%s\n' "${tinygo}"
