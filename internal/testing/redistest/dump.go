package redistest

import (
	"context"
	"reflect"
	"sort"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Dump is the whole content of a Redis database, type by type, in a form
// that compares equal (reflect.DeepEqual, testify's Equal) exactly when the
// data is equal: keyed "<type> <key>", strings as strings, hashes as maps,
// ZSETs with their scores, sets sorted, streams as their events' field maps
// in order without the stream ids (which are times). With distinctEvents,
// consecutive equal stream events count once: a room's journal is delivered
// at least once (a repeated script may append an event again, which the
// journal's upserts absorb). A key of another type fails t.
func Dump(t testing.TB, rdb *redis.Client, distinctEvents bool) map[string]any {
	t.Helper()
	ctx := context.Background()
	names, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatalf("Dump: KEYS: %v", err)
	}
	out := make(map[string]any, len(names))
	for _, k := range names {
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatalf("Dump: TYPE %s: %v", k, err)
		}
		var v any
		switch typ {
		case "string":
			v, err = rdb.Get(ctx, k).Result()
		case "hash":
			v, err = rdb.HGetAll(ctx, k).Result()
		case "zset":
			v, err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "set":
			var m []string
			m, err = rdb.SMembers(ctx, k).Result()
			sort.Strings(m)
			v = m
		case "stream":
			var msgs []redis.XMessage
			msgs, err = rdb.XRange(ctx, k, "-", "+").Result()
			var events []map[string]any
			for _, m := range msgs {
				if !distinctEvents || len(events) == 0 || !reflect.DeepEqual(events[len(events)-1], m.Values) {
					events = append(events, m.Values)
				}
			}
			v = events
		default:
			t.Fatalf("Dump: key %s has unexpected type %s", k, typ)
		}
		if err != nil {
			t.Fatalf("Dump: reading %s %s: %v", typ, k, err)
		}
		out[typ+" "+k] = v
	}
	return out
}
