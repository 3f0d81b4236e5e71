-- The journal's accuracy and fairness metrics (issue 26 §2; journal/doc.go).

-- +goose Up
-- estimated_wait_ms: the estimate the entered event says the buyer was shown (ms; NULL: none).
-- admission_no: the admission number of admission_id (the room's admission order in its epoch).
ALTER TABLE journal_entries ADD COLUMN estimated_wait_ms bigint, ADD COLUMN admission_no bigint;
-- The inversion check (inversionsOf in store.go) reads admitted entries of a lane by arrival
-- and by admission number; the rate check (rateWindow) a room's admissions by time.
CREATE INDEX journal_entries_lane_arrival ON journal_entries (room, epoch, lane, arrival)
    WHERE admission_no IS NOT NULL;
CREATE INDEX journal_entries_lane_admission ON journal_entries (room, epoch, lane, admission_no)
    WHERE admission_no IS NOT NULL;
CREATE INDEX journal_entries_admitted ON journal_entries (room, epoch, admitted_ms)
    WHERE admitted_ms IS NOT NULL;

-- +goose Down
DROP INDEX journal_entries_admitted;
DROP INDEX journal_entries_lane_admission;
DROP INDEX journal_entries_lane_arrival;
ALTER TABLE journal_entries DROP COLUMN admission_no, DROP COLUMN estimated_wait_ms;
