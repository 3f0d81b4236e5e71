// Package worker holds the end-to-end test of the Cloudflare Worker edge
// verifier in this folder (worker.js + the TinyGo wasm module, run under
// workerd). The Worker itself is JavaScript; see README.md.
//
// worker_test.go runs under plain `go test ./...`. It needs workerd from
// `npm ci` in this folder and the wasm module, built with
// scripts/build-wasm.sh (TinyGo from scripts/install-tinygo.sh) or taken
// from $FLASHGATE_WASM; without either it fails with an instruction.
package worker
