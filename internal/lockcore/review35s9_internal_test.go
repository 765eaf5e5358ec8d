package lockcore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/waitrec"
)

// s9Record puts a record of c's in c's book, as written, and in its hash
// when inHash, and returns it as a look reads it.
func s9Record(t *testing.T, rdb rueidis.Client, c *Core, field string, rec waitrec.Record, inHash bool) recordAt {
	t.Helper()
	r := &waitRecord{field: field, rec: rec, answered: true, ok: true}
	c.waits.mu.Lock()
	c.waits.add(r)
	c.waits.mu.Unlock()
	at := recordAt{key: c.waits.key, field: field, value: rec.Encode(), rec: rec}
	if inHash {
		if err := rdb.Do(context.Background(), rdb.B().Hset().Key(at.key).FieldValue().FieldValue(field, at.value).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	return at
}

// TestReview35s9BookAndHashOneVictim: A's record hash lost a2's record (it
// expired in an outage, or was deleted, and a1's record was written
// since): until a tick writes it again, A's book has a2's wait and the
// hash does not. a1 holds M and P and waits for L; b (Client B) holds L
// and waits for M (w1, the youngest) and for Q (w2, a goroutine sharing
// b); a2 holds Q and waits for P. From the book the cycles a1,b and
// a1,b,a2 share only a1's wait: a1's; from the hash (B's look) a1,b is
// the only cycle: its youngest, b's w1. Both confirm (neither cycle goes
// through a2's record): a look from the book that named its victim there
// would end a second wait. a1's look names it from the hash, as B does.
func TestReview35s9BookAndHashOneVictim(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ca := lookCore(t, rdb)
	cb := lookCore(t, rdb)
	prefix := fmt.Sprintf("s9book:%d:", time.Now().UnixNano())
	l, m, q, p := prefix+"l", prefix+"m", prefix+"q", prefix+"p"
	a1, a2, b := layout.Field(ca.ID, "a1"), layout.Field(ca.ID, "a2"), layout.Field(cb.ID, "b")
	ctx := context.Background()
	for name, holder := range map[string]string{l: b, m: a1, q: a2, p: a1} {
		if err := rdb.Do(ctx, rdb.B().Hset().Key(name).FieldValue().FieldValue(holder, "1").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		rdb.Do(context.Background(), rdb.B().Del().Key(l, m, q, p, ca.waits.key, cb.waits.key).Build())
	})
	wa1 := s9Record(t, rdb, ca, "3", waitrec.Record{Owner: a1, Name: l, Kind: "lock", Since: 1000}, true)
	s9Record(t, rdb, ca, "2", waitrec.Record{Owner: a2, Name: p, Kind: "lock", Since: 999}, false)
	w1 := s9Record(t, rdb, cb, "1", waitrec.Record{Owner: b, Name: m, Kind: "lock", Since: 1003}, true)
	s9Record(t, rdb, cb, "2", waitrec.Record{Owner: b, Name: q, Kind: "lock", Since: 1002}, true)

	s9OneVictim(t, ca, wa1, cb, w1)
}

// s9OneVictim has a1 (of ca) and b (of cb) look, and checks that b's wait
// alone ends.
func s9OneVictim(t *testing.T, ca *Core, wa1 recordAt, cb *Core, wb recordAt) {
	t.Helper()
	var ended []string
	if ca.lookFor(t.Context(), wa1, nil) != nil {
		ended = append(ended, "a1")
	}
	if cb.lookFor(t.Context(), wb, nil) != nil {
		ended = append(ended, "b")
	}
	if len(ended) != 1 || ended[0] != "b" {
		t.Errorf("waits ended: %v, want [b] (what every Client reads of the hashes names)", ended)
	}
}

// TestReview35s9StaleRecordOneVictim: a1 and a2 (Client A) read RW; b
// (Client B) holds P and waits for RW's write side; a2, then a1, wait for
// P. a2's wait has ended, but its record's delete failed: the record
// stays in A's hash (a tick deletes it later), and A's book no longer has
// it. From the hash (B's look) the cycles b,a1 and b,a2 share b's wait:
// b's; from the book b,a1 is the only cycle: its youngest, a1's. Both
// confirm: a1's look must name b, as B's does, not end a second wait.
func TestReview35s9StaleRecordOneVictim(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ca := lookCore(t, rdb)
	cb := lookCore(t, rdb)
	prefix := fmt.Sprintf("s9stale:%d:", time.Now().UnixNano())
	rw, p := prefix+"rw", prefix+"p"
	a1, a2, b := layout.Field(ca.ID, "a1"), layout.Field(ca.ID, "a2"), layout.Field(cb.ID, "b")
	ctx := context.Background()
	for _, cmd := range []rueidis.Completed{
		rdb.B().Hset().Key(rw).FieldValue().FieldValue("mode", "read").FieldValue(a1, "1").FieldValue(a2, "1").Build(),
		rdb.B().Hset().Key(p).FieldValue().FieldValue(b, "1").Build(),
	} {
		if err := rdb.Do(ctx, cmd).Error(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		rdb.Do(context.Background(), rdb.B().Del().Key(rw, p, ca.waits.key, cb.waits.key).Build())
	})
	wb := s9Record(t, rdb, cb, "1", waitrec.Record{Owner: b, Name: rw, Kind: "write", Since: 1000}, true)
	stale := s9Record(t, rdb, ca, "1", waitrec.Record{Owner: a2, Name: p, Kind: "lock", Since: 1001}, true)
	wa1 := s9Record(t, rdb, ca, "2", waitrec.Record{Owner: a1, Name: p, Kind: "lock", Since: 1002}, true)
	// a2's wait ended; its delete failed (deleteRecord gave up): out of
	// the book, still in the hash.
	ca.waits.mu.Lock()
	ca.waits.remove(ca.waits.live[stale.field])
	ca.waits.dirty = true
	ca.waits.mu.Unlock()

	s9OneVictim(t, ca, wa1, cb, wb)
}

// TestReview35s9BookEmptiesByOwner: waits of owners shared by several
// goroutines of one Client, which end every way (given up at their limit,
// their context cancelled, acquired), leave nothing in the book: neither
// a record nor an owner's entry in its index.
func TestReview35s9BookEmptiesByOwner(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	c := grantCore(t, raw, Config{DeadlockAfter: 50 * time.Millisecond})
	name := grantName(t, raw)
	m := NewMutex(c, name, Reentrant{})
	h := WithOwner(t.Context(), "h")
	if _, ok, err := m.Acquire(h, 0, 0); !ok || err != nil {
		t.Fatalf("h: %v %v", ok, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	// o0's waits give up at their limit, o1's are cancelled, o2's acquire
	// (one, then the others by re-entry).
	var got []<-chan acquired
	for i := range 12 {
		switch i % 3 {
		case 0:
			got = append(got, goAcquire(m, WithOwner(t.Context(), "o0"), 300*time.Millisecond, 0))
		case 1:
			got = append(got, goAcquire(m, WithOwner(ctx, "o1"), NoLimit, 0))
		default:
			got = append(got, goAcquire(m, WithOwner(t.Context(), "o2"), NoLimit, 0))
		}
	}
	booked := func() (live, owners int) {
		c.waits.mu.Lock()
		defer c.waits.mu.Unlock()
		return len(c.waits.live), len(c.waits.owners)
	}
	waitUntil(t, 5*time.Second, "12 records of 3 owners in the book", func() bool {
		live, owners := booked()
		return live == 12 && owners == 3
	}, func() string { live, owners := booked(); return fmt.Sprintf("%d records of %d owners", live, owners) })
	for i := 0; i < 12; i += 3 {
		if r := receive(t, got[i], "a wait that gives up"); r.ok || r.err != nil {
			t.Fatalf("o0: %v %v, want not acquired", r.ok, r.err)
		}
	}
	cancel()
	for i := 1; i < 12; i += 3 {
		if r := receive(t, got[i], "a cancelled wait"); r.ok {
			t.Fatal("o1 acquired")
		}
	}
	if err := m.Unlock(h); err != nil {
		t.Fatal(err)
	}
	for i := 2; i < 12; i += 3 {
		if r := receive(t, got[i], "a wait that acquires"); !r.ok || r.err != nil {
			t.Fatalf("o2: %v %v, want acquired", r.ok, r.err)
		}
	}
	for range 4 {
		if err := m.Unlock(WithOwner(t.Context(), "o2")); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 5*time.Second, "an empty book after the waits ended", func() bool {
		live, owners := booked()
		return live == 0 && owners == 0
	}, func() string {
		live, owners := booked()
		return fmt.Sprintf("%d records, %d owners' entries", live, owners)
	})
}
