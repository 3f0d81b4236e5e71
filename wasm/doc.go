// Command wasm is the flashgate admission-token verifier compiled to
// WebAssembly for edge hosts (a Cloudflare Worker under workerd, wazero, …).
//
// The module is built with TinyGo (scripts/build-wasm.sh; toolchain from
// scripts/install-tinygo.sh) for the target wasm/target/flashgate-wasm.json
// (wasm32-unknown-unknown, no imports). It exports a small byte-moving ABI
// over package verifier — see wasm/README.md for the ABI, version 2 (the pure
// verify and the host-crypto verify_begin/verify_finish), and the result
// codes. All verification logic lives in package verifier; the glue in
// main_tinygo.go only copies bytes in and out of linear memory. JavaScript
// hosts use it through the flashgate-verifier package (js/flashgate-verifier).
//
// With the standard Go toolchain this package builds to a program that does
// nothing, so that `go build ./...`, `go vet ./...` and `go test ./...` work;
// wasm_test.go builds the real module with TinyGo and drives it with wazero.
package main

// main is empty: the module is a reactor. Hosts call _initialize once and
// then the exported functions.
func main() {}
