-- The journal's first schema (journal/doc.go describes every column).

-- +goose Up
CREATE TABLE journal_entries (
    room         text   NOT NULL,
    epoch        text   NOT NULL,
    arrival      bigint NOT NULL CHECK (arrival >= 1),
    user_id      text,
    lane         text   CHECK (lane IN ('public', 'priority', 'bypass')),
    entered_ms   bigint,
    admitted_ms  bigint,
    admission_id text,
    exchanged_ms bigint,
    ended_ms     bigint,
    end_kind     text   CHECK (end_kind IN ('completed', 'revoked', 'expired', 'left', 'closed')),
    end_reason   text,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (room, epoch, arrival),
    CHECK ((ended_ms IS NULL) = (end_kind IS NULL))
);
CREATE INDEX journal_entries_user ON journal_entries (room, user_id);
CREATE INDEX journal_entries_admission ON journal_entries (admission_id) WHERE admission_id IS NOT NULL;

CREATE TABLE journal_room_events (
    room      text   NOT NULL,
    epoch     text   NOT NULL,
    stream_id text   NOT NULL,
    kind      text   NOT NULL CHECK (kind IN ('config', 'audit')),
    at_ms     bigint NOT NULL,
    actor     text   NOT NULL DEFAULT '',
    action    text   NOT NULL DEFAULT '',
    detail    jsonb  NOT NULL DEFAULT '{}',
    PRIMARY KEY (room, epoch, stream_id)
);
CREATE INDEX journal_room_events_at ON journal_room_events (room, at_ms);

-- +goose Down
DROP TABLE journal_room_events;
DROP TABLE journal_entries;
