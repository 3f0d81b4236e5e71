package server

import (
	"context"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/journal"
)

// Journal is what the admin journal routes read: *journal.Store implements
// it (flashgate serve opens one when FLASHGATE_JOURNAL_DSN is set). Errors
// are the store's: CodeNotFound, CodeUnavailable, CodeInternal.
type Journal interface {
	// Entries returns user's journaled entries in room, newest first;
	// empty when there is none.
	Entries(ctx context.Context, room, user string) ([]journal.Entry, error)
	// Report returns room's aggregates over epoch ("" = all).
	Report(ctx context.Context, room, epoch string) (journal.Report, error)
}

// JournalTimeout bounds one admin journal request's PostgreSQL queries (the
// Redis budget, Options.RedisTimeout, does not apply: a report over a large
// sale scans every entry of the room).
const JournalTimeout = 10 * time.Second

// journalEntries is the body of GET /admin/rooms/:room/journal.
type journalEntries struct {
	Room    string              `json:"room"`
	User    string              `json:"user"`
	Entries []journal.EntryJSON `json:"entries"` // newest first, at least one
}

// journalBudget marks the answer no-store, answers journal_off when the
// server has no journal, and bounds the handler's queries by JournalTimeout.
func (s *Server) journalBudget(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	if s.journal == nil {
		return problemFor(string(flashgate.CodeJournalOff),
			"this server has no journal: set FLASHGATE_JOURNAL_DSN for flashgate serve (docs/operations.md#asking-the-journal)")
	}
	if !issuer.ValidID(param(c, "room")) {
		return problemFor(string(flashgate.CodeInvalidInput), "invalid room id")
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), JournalTimeout)
	defer cancel()
	c.SetUserContext(ctx)
	return c.Next()
}

// GET /admin/rooms/:room/journal?user=U: what the journal knows of user's
// entries in the room (journal.EntryJSON), newest first. Errors: no or an
// invalid user (400 invalid_input), none journaled (404 not_found), the
// journal unreachable (503 unavailable).
func (s *Server) adminJournal(c *fiber.Ctx) error {
	room, user := param(c, "room"), query(c, "user")
	if !issuer.ValidID(user) {
		return problemFor(string(flashgate.CodeInvalidInput), "the user query parameter must be a user id")
	}
	es, err := s.journal.Entries(c.UserContext(), room, user)
	if err != nil {
		return journalProblem(err)
	}
	if len(es) == 0 {
		return problemFor(string(flashgate.CodeNotFound), "the journal has no entry of this user in this room")
	}
	out := journalEntries{Room: room, User: user, Entries: make([]journal.EntryJSON, len(es))}
	for i, e := range es {
		out.Entries[i] = e.JSON()
	}
	return c.JSON(out)
}

// GET /admin/rooms/:room/journal/report[?epoch=E]: the room's aggregates
// (journal.Report). Errors: an invalid epoch (400 invalid_input), nothing
// journaled for the room (404 not_found), the journal unreachable (503).
func (s *Server) adminJournalReport(c *fiber.Ctx) error {
	room, epoch := param(c, "room"), query(c, "epoch")
	if epoch != "" && !flashgate.ValidEpoch(epoch) {
		return problemFor(string(flashgate.CodeInvalidInput), "epoch must be a room epoch (base36)")
	}
	r, err := s.journal.Report(c.UserContext(), room, epoch)
	if err != nil {
		return journalProblem(err)
	}
	return c.JSON(r)
}

// journalProblem words the journal's outage as the journal's, not the queue
// store's (toProblem's wording for unavailable).
func journalProblem(err error) error {
	var de *flashgate.Error
	if errors.As(err, &de) && de.Code == flashgate.CodeUnavailable {
		p := problemFor(string(de.Code), "the journal (PostgreSQL) is unavailable; retry later")
		p.cause = err
		return p
	}
	return err
}
