package fixture

// README "Read next" resolves; so do docs/guide.md#setup-steps,
// docs/guide.md "Setup steps" and docs/guide.md#custom.
// These dangle:
// README "Scaling"
// docs/guide.md#gone
// docs/gone.md
// docs/guide.md "Teardown"
