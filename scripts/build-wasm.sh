#!/usr/bin/env bash
# build-wasm.sh — build the flashgate wasm verifier (package ./wasm) with TinyGo.
#
# Usage: scripts/build-wasm.sh [OUTPUT]     (default: build/flashgate-verifier.wasm)
#
# Needs the toolchain from scripts/install-tinygo.sh (it is not installed
# implicitly: installing needs root for apt and takes minutes; run
# scripts/install-tinygo.sh first, e.g. from `make wasm`).
#
# Environment:
#   FLASHGATE_TOOLCHAIN_DIR  toolchain cache root (see install-tinygo.sh)
#   FLASHGATE_WASM_OPT_LEVEL optimization level for tinygo -opt and wasm-opt -O:
#                            2 (default), s, z (smallest) or 1.
#   FLASHGATE_WASM_GC        TinyGo GC: precise (default) or conservative.
#   FLASHGATE_WASM_OPT=0     skip the binaryen wasm-opt pass
#
# Defaults chosen by measurement (TinyGo 0.41.0, wasm-opt 108, ABI v1 module;
# valid token of internal/testing/tokencases, us per verify, median of 3; Node 20
# calls verify directly; wazero = BenchmarkWasmVerify; native
# verifier.Verify ~57 us in the same runs; memory growth over 10,000
# verifies = +576 KiB (192 -> 768 KiB) for all six):
#
#   -opt/-gc          raw B    gzip B   Node us  wazero us
#   z conservative   193542   101031     793      996
#   z precise        194785   101354     681      755
#   s conservative   205787   104688     430      816
#   s precise        207223   104986     332      574
#   2 conservative   258497   119577     446      560
#   2 precise        260897   119956     354      367   <- default (~6x native)
#
# precise beats conservative everywhere (less heap to scan). s and 2 are
# within 7 % of each other in Node, but in workerd (ABI 2 module, the
# example Worker with FLASHGATE_CRYPTO=pure under wrk, bench-workerd.sh)
# 2/precise served 1,633 verified requests/s against 1,198-1,305 for
# s/precise (0.49 vs 0.28-0.31 of forwarding), and wazero is 1.6x faster
# with it: 2/precise is the default, 54 KB (15 KB gzip) larger than s.
#
# Prints the raw and gzip sizes on stderr and the output path as the last
# stdout line. Fails if the module exceeds the size budget (300 KB raw,
# 150 KB gzip) or imports anything (the module must instantiate with {}).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/.." && pwd)"
out="${1:-${repo}/build/flashgate-verifier.wasm}"

level="${FLASHGATE_WASM_OPT_LEVEL:-2}"
case "${level}" in
z | s | 1 | 2) ;;
*)
	printf 'build-wasm: FLASHGATE_WASM_OPT_LEVEL must be z, s, 1 or 2, not %q\n' "${level}" >&2
	exit 2
	;;
esac

gc="${FLASHGATE_WASM_GC:-precise}"
case "${gc}" in
conservative | precise) ;;
*)
	printf 'build-wasm: FLASHGATE_WASM_GC must be conservative or precise, not %q\n' "${gc}" >&2
	exit 2
	;;
esac

MAX_RAW=300000
MAX_GZIP=150000

log() { printf 'build-wasm: %s\n' "$*" >&2; }

if ! tinygo="$("${here}/install-tinygo.sh" --print-path)"; then
	log "TinyGo is not installed: run scripts/install-tinygo.sh first"
	exit 1
fi
export TINYGOROOT="$(cd "$(dirname "${tinygo}")/.." && pwd)"
# TinyGo finds wasm-ld-19 on PATH (/usr/bin); keep LLVM 19 tools first anyway.
export PATH="/usr/lib/llvm-19/bin:${PATH}"

mkdir -p "$(dirname "${out}")"
out="$(cd "$(dirname "${out}")" && pwd)/$(basename "${out}")"
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT

# -gc: precise or conservative (both free; precise is faster, see above).
#   Never "leaking" (TinyGo's wasm-unknown default): it grew to 640 MiB
#   after 1,000 verifies.
# -scheduler=none: no goroutines in the module; asyncify would add ~30%.
# -panic=trap: a panic becomes a wasm trap (no message formatting code; the
#   module has no imports, so a message could not be printed anyway); the
#   host must drop the instance after any trap (wasm/README.md). Saves ~6 KB.
(
	cd "${repo}"
	"${tinygo}" build \
		-target="${repo}/wasm/target/flashgate-wasm.json" \
		-gc="${gc}" -scheduler=none -panic=trap -opt="${level}" -no-debug \
		-o "${tmp}/raw.wasm" ./wasm
)
final="${tmp}/raw.wasm"
raw_size=$(stat -c %s "${tmp}/raw.wasm")

if [[ "${FLASHGATE_WASM_OPT:-1}" != 0 ]] && command -v wasm-opt >/dev/null; then
	# Only the features the target enables (flashgate-wasm.json): MVP +
	# sign-ext + nontrapping-fptoint, so the output runs wherever the input does.
	wasm-opt "-O${level}" --strip-debug --strip-producers \
		--enable-sign-ext --enable-nontrapping-float-to-int \
		"${tmp}/raw.wasm" -o "${tmp}/opt.wasm"
	opt_size=$(stat -c %s "${tmp}/opt.wasm")
	log "tinygo output ${raw_size} B, after wasm-opt -O${level} ${opt_size} B"
	if ((opt_size < raw_size)); then
		final="${tmp}/opt.wasm"
	fi
fi

# The module must not import anything: hosts instantiate it with {}.
if command -v wasm-dis >/dev/null && wasm-dis "${final}" | grep -q '^ (import '; then
	log "module has imports; hosts instantiate it with {}:"
	wasm-dis "${final}" | grep '^ (import ' >&2
	exit 1
fi

size=$(stat -c %s "${final}")
gz=$(gzip -9c "${final}" | wc -c)
log "$(awk -v f="${out#"${repo}"/}" -v s="${size}" -v g="${gz}" \
	'BEGIN { printf "%s: %d bytes raw (%.1f KB), %d bytes gzip -9 (%.1f KB)", f, s, s/1000, g, g/1000 }')"
if ((size > MAX_RAW || gz > MAX_GZIP)); then
	log "over budget (limits: ${MAX_RAW} B raw, ${MAX_GZIP} B gzip)"
	exit 1
fi
mv "${final}" "${out}"
printf '%s\n' "${out}"
