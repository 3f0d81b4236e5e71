// Package upgrade holds flashgate's rolling-upgrade test; it has no
// non-test code. TestRollingUpgradeMidSale builds `flashgate` twice — the
// previous release (PreviousRelease, a commit of this repository's
// history, built from `git archive`) and this tree — and runs both
// versions of `flashgate serve` and of `flashgate journal run` together
// against one redis-server and one PostgreSQL while a simulated sale
// (internal/simulate) sends every buyer's calls alternately to each
// version: enter on one, status and exchange on the other, and back. Half
// way through, the old issuer is stopped (SIGTERM, as a rolling update
// does) and a second new one takes its place, and the old journal process
// is replaced by a new one. Every invariant of the simulation must hold,
// every buyer must finish, and the journal must hold every event the
// issuers counted, with nothing refused (flashgate_journal_rejected_total
// 0). docs/operations.md#upgrading states the supported order.
package upgrade
