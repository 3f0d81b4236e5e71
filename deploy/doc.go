// Package deploy holds the operator's files and their tests: the Grafana
// dashboard (grafana/flashgate.json) and the Prometheus alert rules
// (prometheus/alerts.yml), checked against the server's metrics (docs/operations.md
// "Observability"); the Helm chart (helm/flashgate), linted and rendered
// through the helm Go module over its default values and each
// helm/flashgate/ci/*-values.yaml, every object decoded strictly into the
// Kubernetes API types (docs/operations.md#deploying-on-kubernetes); and the container
// image (../Containerfile), built with buildah and its binary run
// (TestImage). It is a module of its own so that Prometheus's rule parser,
// helm and the Kubernetes API types are never requirements of the flashgate
// module (and of verifier's importers).
package deploy
