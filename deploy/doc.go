// Package deploy holds the operator's files — the Grafana dashboard
// (grafana/flashgate.json) and the Prometheus alert rules
// (prometheus/alerts.yml) — and the test that checks them against the
// server's metrics (README "Observability"). It is a module of its own so
// that Prometheus's rule parser, which its test uses, is never a
// requirement of the flashgate module (and of verifier's importers).
package deploy
