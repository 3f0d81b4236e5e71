package fixture

// README.md#read-next resolves; so do docs/guide.md#setup-steps and
// docs/guide.md#custom; code names no section: docs/guide.md "Setup steps".
// These dangle:
// README "Scaling"
// docs/guide.md#gone
// docs/gone.md
// docs/guide.md "Teardown"
