package main

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/server"
)

// TestServeEnvDefaultsArePackageDefaults: the defaults that stay in the env
// tags (so that `serve -h` and docs/configuration.md show them, or because an
// explicit zero is refused) are the packages' own.
func TestServeEnvDefaultsArePackageDefaults(t *testing.T) {
	for field, want := range map[string]string{
		"Issuer":                 issuer.DefaultIssuer,
		"Audience":               issuer.DefaultAudience,
		"UserHeader":             server.DefaultUserHeader,
		"Identity":               server.IdentityHeader,
		"DefaultCapacity":        strconv.Itoa(issuer.DefaultCapacity),
		"DefaultRate":            strconv.Itoa(issuer.DefaultRatePerMinute),
		"DefaultSessionDuration": issuer.DefaultSessionDuration.String(),
		"DefaultTick":            issuer.DefaultTick.String(),
		"DefaultArrivalWindow":   issuer.DefaultArrivalWindow.String(),
		"DefaultPreQueue":        string(issuer.PreQueueFIFO),
		"EnterPerUser":           strconv.Itoa(server.DefaultEnterPerUser),
		"EnterPerAddress":        strconv.Itoa(server.DefaultEnterPerAddress),
		"EnterWindow":            server.DefaultEnterWindow.String(),
		"StreamsPerUser":         strconv.Itoa(server.DefaultStreamsPerUser),
		"StreamsPerAddress":      strconv.Itoa(server.DefaultStreamsPerAddress),
		"Concurrency":            strconv.Itoa(server.DefaultConcurrency),
		"StatusPerUser":          strconv.Itoa(server.DefaultStatusPerUser),
		"ExchangePerUser":        strconv.Itoa(server.DefaultExchangePerUser),
		"LeavePerUser":           strconv.Itoa(server.DefaultLeavePerUser),
		"CompletePerUser":        strconv.Itoa(server.DefaultCompletePerUser),
		"AutoRoomsPerAddress":    strconv.Itoa(server.DefaultAutoRoomsPerAddress),
		"AutoRoomWindow":         server.DefaultAutoRoomWindow.String(),
		"AddressPrefixV4":        strconv.Itoa(server.DefaultAddressPrefixV4),
		"AddressPrefixV6":        strconv.Itoa(server.DefaultAddressPrefixV6),
		"CompletionTimeout":      issuer.DefaultCompletionTimeout.String(),
		"StatusSnapshot":         time.Duration(0).String(), // off: issuer.Config.StatusSnapshot's zero, exact positions
		"ScriptBatch":            strconv.Itoa(issuer.DefaultScriptBatch),
		"RedisTimeout":           server.DefaultRedisTimeout.String(),
		"MaxAutoRooms":           strconv.Itoa(issuer.DefaultMaxAutoRooms),
		"AutoRoomIdle":           issuer.DefaultAutoRoomIdle.String(),
		"RoomRetention":          issuer.DefaultRoomRetention.String(),
		"JournalMaxLen":          strconv.Itoa(issuer.DefaultJournalMaxLen),
		"LostRooms":              string(issuer.LostRoomsRecreate),
	} {
		f, ok := reflect.TypeOf(serveConfig{}).FieldByName(field)
		if !assert.True(t, ok, field) {
			continue
		}
		got := f.Tag.Get("envDefault")
		if f.Type == reflect.TypeOf(time.Duration(0)) || f.Type == reflect.TypeOf(offDuration{}) {
			d, err := time.ParseDuration(got)
			assert.NoError(t, err, field)
			got = d.String()
		}
		assert.Equal(t, want, got, field)
	}
}
