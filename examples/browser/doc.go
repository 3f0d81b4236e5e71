// Package browser holds the proof in a real browser: browser_test.go puts
// Debian's Chromium (driven by driver.mjs over playwright-core, pinned in
// package-lock.json) through the shopper's whole path — the Cloudflare
// Worker in workerd redirects it to flashgate's waiting page, it watches
// its place fall, is admitted and lands back on the product — against a
// real redis-server, the flashgate binary in visitor mode and a stub shop.
//
// It runs under plain `go test ./...` and fails (never skips) without
// Chromium (scripts/install-chromium.sh), `npm ci` here and in
// ../cloudflare-worker, and the wasm verifier ($FLASHGATE_WASM, else a TinyGo
// build: internal/testing/wasmbuild); `make test` provides them all.
// Screenshots of each state go to build/screenshots (or
// $FLASHGATE_SCREENSHOTS).
package browser
