package lua_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/lua"
)

// holdScripts are one lock kind's scripts that change a hold, as a test
// sends them: acquire for an owner that holds nothing, re-enter to a
// count, unlock to a count (the reply: the count left, -1 for nothing).
type holdScripts struct {
	kind    string
	key     string
	field   string
	acquire func(t *testing.T)
	reenter func(t *testing.T, target int)
	unlock  func(t *testing.T, target int) int64
	// taken is the hash events an acquisition makes before the count's
	// own (a read-write lock's mode).
	taken []string
}

// kinds returns the scripts of every lock kind that keeps holds in a hash,
// on rdb, each on its own key.
func kinds(rdb rueidis.Client) []holdScripts {
	const lease, field = "10000", "c:o"
	exec := func(t *testing.T, s *lua.Script, keys []string, args ...string) rueidis.RedisResult {
		t.Helper()
		return s.Exec(t.Context(), rdb, keys, args)
	}
	acquired := func(t *testing.T, res rueidis.RedisResult) {
		t.Helper()
		require.True(t, rueidis.IsRedisNil(res.Error()), "acquire replied %v, want nil (taken)", res.Error())
	}
	count := func(t *testing.T, res rueidis.RedisResult) int64 {
		t.Helper()
		n, err := res.AsInt64()
		require.NoError(t, err)
		return n
	}
	reenter := func(key string) func(t *testing.T, target int) {
		return func(t *testing.T, target int) {
			require.NoError(t, exec(t, lua.LockReenter, []string{key, "redisson_lock_token:{" + key + "}",
				"redisson_lock__channel:{" + key + "}"}, lease, field, strconv.Itoa(target), "publish").Error())
		}
	}
	unlock := func(key string) func(t *testing.T, target int) int64 {
		return func(t *testing.T, target int) int64 {
			return count(t, exec(t, lua.LockUnlock, []string{key, "redisson_lock__channel:{" + key + "}"},
				"0", lease, field, "publish", strconv.Itoa(target)))
		}
	}
	fair := func(key string) []string {
		return []string{key, "redisson_lock_queue:{" + key + "}", "redisson_lock_timeout:{" + key + "}",
			"relock_lock_alive:{" + key + "}", "redisson_lock__channel:{" + key + "}"}
	}
	rw := func(key, field string, read bool) holdScripts {
		prefix, channel := "{"+key+"}", "redisson_rwlock:{"+key+"}"
		acq, re, un, msg := lua.RWWriteAcquire, lua.RWWriteReenter, lua.RWWriteUnlock, "1"
		kind := "write"
		if read {
			acq, re, un, msg, kind = lua.RWReadAcquire, lua.RWReadReenter, lua.RWReadUnlock, "0", "read"
		}
		return holdScripts{kind: kind, key: key, field: field, taken: []string{"hset"},
			acquire: func(t *testing.T) { acquired(t, exec(t, acq, rwKeys(key), lease, field, prefix)) },
			reenter: func(t *testing.T, target int) {
				require.NoError(t, exec(t, re, []string{key, channel}, lease, field, prefix, strconv.Itoa(target), "publish").Error())
			},
			unlock: func(t *testing.T, target int) int64 {
				return count(t, exec(t, un, []string{key, channel}, msg, lease, field, "publish", strconv.Itoa(target), prefix))
			},
		}
	}
	return []holdScripts{
		{kind: "plain", key: "counts:plain", field: field,
			acquire: func(t *testing.T) { acquired(t, exec(t, lua.LockAcquire, lockKeys("counts:plain"), lease, field)) },
			reenter: reenter("counts:plain"), unlock: unlock("counts:plain")},
		{kind: "fenced", key: "counts:fenced", field: field,
			acquire: func(t *testing.T) {
				got, err := exec(t, lua.FencedAcquire, fencedKeys("counts:fenced"),
					lease, field).AsIntSlice()
				require.NoError(t, err)
				require.Len(t, got, 2)
				require.Equal(t, int64(1), got[0], "fenced acquire: taken")
			},
			reenter: reenter("counts:fenced"), unlock: unlock("counts:fenced")},
		{kind: "fair", key: "counts:fair", field: field,
			acquire: func(t *testing.T) {
				acquired(t, exec(t, lua.FairAcquire, fairAcquireKeys("counts:fair"), lease, field, "750", "1", "300000", "publish", "0"))
			},
			reenter: reenter("counts:fair"),
			unlock: func(t *testing.T, target int) int64 {
				return count(t, exec(t, lua.FairUnlock, fair("counts:fair"), "0", lease, field, "publish", strconv.Itoa(target)))
			}},
		rw("counts:rw-read", field, true),
		rw("counts:rw-write", field+":write", false),
	}
}

// hashEvents collects the keyspace notifications of one key's hash
// commands (the server runs with notify-keyspace-events Kh).
type hashEvents struct {
	rdb    rueidis.Client
	msgs   chan rueidis.PubSubMessage
	marker string
}

func watchHash(t *testing.T, rdb rueidis.Client, key string) *hashEvents {
	t.Helper()
	h := &hashEvents{rdb: rdb, msgs: make(chan rueidis.PubSubMessage, 256), marker: "marker:" + key}
	dc, cancel := rdb.Dedicate()
	t.Cleanup(cancel)
	dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) {
		select {
		case h.msgs <- m:
		default:
		}
	}})
	require.NoError(t, dc.Do(t.Context(), dc.B().Subscribe().Channel("__keyspace@0__:"+key, h.marker).Build()).Error())
	return h
}

// take returns the events since the last take: a marker is published
// after them, and the events are those that came before it.
func (h *hashEvents) take(t *testing.T) []string {
	t.Helper()
	require.NoError(t, h.rdb.Do(t.Context(), h.rdb.B().Publish().Channel(h.marker).Message("m").Build()).Error())
	events := []string{}
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m := <-h.msgs:
			if m.Channel == h.marker {
				return events
			}
			events = append(events, m.Message)
		case <-timeout:
			t.Fatalf("no marker 5s after publishing it (events so far %v)", events)
		}
	}
}

// TestHoldCountsMoveByHincrby: at every lock kind, acquire, re-enter and
// unlock change the count with HINCRBY, one level each, and a request
// sent twice has the effect of sending it once: the second send writes
// nothing to the hash, and the count is the one the client expects.
func TestHoldCountsMoveByHincrby(t *testing.T) {
	srv := redistest.Start(t, "--notify-keyspace-events", "Kh")
	rdb := srv.Client(t)
	for _, k := range kinds(rdb) {
		t.Run(k.kind, func(t *testing.T) {
			events := watchHash(t, rdb, k.key)
			hcount := func() string {
				v, err := rdb.Do(t.Context(), rdb.B().Hget().Key(k.key).Field(k.field).Build()).ToString()
				if rueidis.IsRedisNil(err) {
					return "none"
				}
				require.NoError(t, err)
				return v
			}
			step := func(what, wantCount string, wantEvents []string, send func()) {
				t.Helper()
				send()
				send()
				assert.Equal(t, wantCount, hcount(), "count after %s sent twice", what)
				assert.Equal(t, wantEvents, events.take(t), "hash events of %s sent twice", what)
			}
			step("acquire", "1", append(k.taken, "hincrby"), func() { k.acquire(t) })
			for _, target := range []int{2, 3} {
				step("re-enter to "+strconv.Itoa(target), strconv.Itoa(target), []string{"hincrby"},
					func() { k.reenter(t, target) })
			}
			for _, target := range []int{2, 1} {
				left := []int64{}
				step("unlock to "+strconv.Itoa(target), strconv.Itoa(target), []string{"hincrby"},
					func() { left = append(left, k.unlock(t, target)) })
				assert.Equal(t, []int64{int64(target), int64(target)}, left, "unlock replies")
			}
			left := []int64{}
			step("unlock to 0", "none", []string{"hdel"}, func() { left = append(left, k.unlock(t, 0)) })
			assert.Equal(t, []int64{0, -1}, left, "last unlock replies: released, then nothing held")
			n, err := rdb.Do(t.Context(), rdb.B().Exists().Key(k.key).Build()).AsInt64()
			require.NoError(t, err)
			assert.Zero(t, n, "the hash is gone after the last unlock")
		})
	}
}

// TestHoldCountsFollowTheClient: a count that is neither where the client
// expects it before the call nor at the target (a request whose reply was
// lost moved it, and was not resent) is brought to the target: up to it
// by an acquisition or a re-entry, down to it (never up) by an unlock.
func TestHoldCountsFollowTheClient(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	for _, k := range kinds(rdb) {
		t.Run(k.kind, func(t *testing.T) {
			t.Cleanup(func() { rdb.Do(context.Background(), rdb.B().Del().Key(k.key).Build()) })
			hcount := func() string {
				v, err := rdb.Do(t.Context(), rdb.B().Hget().Key(k.key).Field(k.field).Build()).ToString()
				require.NoError(t, err)
				return v
			}
			setCount := func(n string) {
				require.NoError(t, rdb.Do(t.Context(), rdb.B().Hset().Key(k.key).FieldValue().FieldValue(k.field, n).Build()).Error())
			}
			k.acquire(t)
			setCount("5")
			k.acquire(t)
			assert.Equal(t, "1", hcount(), "an acquisition takes a level won unseen over at 1")
			setCount("5")
			k.reenter(t, 2)
			assert.Equal(t, "2", hcount(), "a re-entry to 2 from 5")
			setCount("5")
			assert.Equal(t, int64(3), k.unlock(t, 3), "an unlock to 3 from 5")
			assert.Equal(t, "3", hcount())
			setCount("1")
			assert.Equal(t, int64(1), k.unlock(t, 2), "an unlock to 2 of a count of 1 keeps it")
			assert.Equal(t, "1", hcount())
			assert.Equal(t, int64(0), k.unlock(t, 0))
		})
	}
}
