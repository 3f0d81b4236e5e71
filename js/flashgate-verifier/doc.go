// Package verifierjs holds the Go side of the flashgate-verifier JavaScript
// package (index.js, index.d.ts, README.md in this directory): the tests that
// run it in Node, workerd and Deno on the shared token case table, and the
// differential fuzz of the package against the native verifier.
//
// The package itself needs no Go: it is an npm package wrapping the wasm
// module of ../../wasm (`make js` copies the module here; `npm pack` then
// packs it).
package verifierjs
