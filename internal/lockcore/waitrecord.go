package lockcore

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/waitrec"
	"github.com/relock-go/relock/lua"
)

// Wait records (see package internal/waitrec for their layout): every
// waiting call of every kind that has waited RecordAfter (or the deadlock
// detection delay, when that is shorter) records itself in its Client's
// wait record hash, and deletes its record when the wait ends, however it
// ends. A call that gets what it waits for at its first attempt (the
// uncontended path), a single attempt (wait 0), and a wait shorter than
// that send nothing more: most waits of a busy lock are hand-offs a few
// milliseconds long, which an operator does not need to see and which
// cannot be deadlocks yet, and recording them cost two commands per
// acquisition. The record's since is when the wait began (the server's
// time at the write, less how long the wait had lasted).
//
// Cost: one command when a wait has lasted RecordAfter and one at its
// end. The record's write (lua/wait_record.lua: HSET and PEXPIRE in one
// script, stamped with the server's TIME) is sent on a goroutine of its
// own, while the call sleeps, so that it adds no round trip to the wait;
// the wait does not wait for its reply. The delete (HDEL) is sent when
// the wait ends, after the write's reply (so that it cannot overtake it):
// by a call that ends without what it waited for, before it returns (see
// unrecord); else on a goroutine of its own (the ending call does not
// wait for it), or, when the write has not been answered yet, by the
// write's goroutine once it is. Close waits for both goroutines, then
// deletes the hash.
//
// The hash's expiry is the watchdog timeout: set by each write, and
// renewed on the watchdog's tick (one call per Client per tick, pipelined
// with the holds' renewals) while the Client has records; the same call
// deletes the records whose delete failed. A Client that dies leaves
// records that expire with its hash.
//
// A hash that expired while its Client lives (an outage longer than the
// watchdog timeout: no tick renewed it), or that was deleted, is written
// again: the tick's call says when a record of a running wait is missing,
// and the Client then sends the records of its running waits again, as
// they were first written, in one script (lua/wait_rewrite.lua; see
// rewriteRecords). A tick lost for a whole watchdog timeout takes the hash
// off the watchdog; it is put back at once while the Client has records
// (see lostWaitLease), so that the first tick after the outage finds the
// records gone. A record's delete is sent after the reply of a rewrite in
// flight that carries it, and no rewrite carries a record whose delete
// was sent, so that a rewrite never brings back a wait that has ended.
//
// A record's write or delete that fails does not fail the wait: the
// record is then missing (an operator and the deadlock detector do not
// see the wait) until a tick reaches Redis again and the write is sent
// again (see Replied), or, while its delete is sent again (see
// deleteRecord), left: the detector reads it as a wait.

// waitBook is what a Core keeps of its wait records.
type waitBook struct {
	key   string        // waitrec.Key(prefix, ID)
	after time.Duration // deadlock detection delay; 0: off
	off   bool          // no records (tests on a model of Redis)

	mu   sync.Mutex
	seq  uint64                 // the last field given
	live map[string]*waitRecord // records written or being written, by field
	// owners is live by owner (the record's Owner): the latest record,
	// whose sameOwner links the others (an owner has one record but while
	// goroutines that share it wait at once); what the deadlock detector
	// reads of its own Client (see ownWaits).
	owners map[string]*waitRecord
	dirty  bool // a delete failed: the next tick cleans up
	// rewriting: a rewrite of the records is in flight (rewriteRecords).
	rewriting bool
	// leased: the hash is on the watchdog (or being put there), from the
	// Client's first record until Close, or until the watchdog lost it.
	leased bool
	// unwritten: the last tick found a running wait whose record's write
	// failed; its reply has it sent again (see Replied).
	unwritten bool
	// ended counts the records whose call ended (over) that are still in
	// the book: a last Unlock looks for its owner's only while there are
	// any (see Mutex.awaitEndedWaits). Written under mu.
	ended atomic.Int64
}

// waitRecord is one waiting call's record.
type waitRecord struct {
	field string
	rec   waitrec.Record // Since 0 until the write's reply
	from  time.Duration  // when the wait began: the Core's epoch plus from
	// sameOwner is the next record of the owner in waitBook.owners
	// (waitBook.mu).
	sameOwner *waitRecord

	mu       sync.Mutex
	written  chan struct{} // closed once answered; made by the first to wait for it
	answered bool          // the write was answered
	ok       bool          // the write succeeded (rec.Since set)
	ended    bool          // the wait ended before the write was answered
	// deleting: the record's delete is being sent; no rewrite carries it
	// from then on.
	deleting bool
	// over: the call whose wait it records ended; left: the record left
	// the book (both waitBook.mu).
	over, left bool
	// rewrite, when not nil, is closed when the rewrite in flight that
	// carries the record is answered: its delete waits for it.
	rewrite chan struct{}

	// gone, when not nil, is closed once the record leaves the book (its
	// delete answered, or given up): see waitBook.endedWaits.
	gone chan struct{}
}

// writtenChan returns a channel closed once r's write was answered.
func (r *waitRecord) writtenChan() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.written == nil {
		r.written = make(chan struct{})
		if r.answered {
			close(r.written)
		}
	}
	return r.written
}

// isAnswered reports whether r's write was answered.
func (r *waitRecord) isAnswered() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answered
}

// beginDelete marks r as being deleted, so that no rewrite carries it
// from now on, and waits (until ctx ends) for the reply of a rewrite in
// flight that carries it: a delete sent after that reply reaches Redis
// after the rewrite. It returns ctx's error when ctx ended first.
func (r *waitRecord) beginDelete(ctx context.Context) error {
	r.mu.Lock()
	r.deleting = true
	ch := r.rewrite
	r.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// recordOwner is the waiter as a lock's hash names a holder.
func (w *Wait) recordOwner() string {
	if w.Field != "" {
		return w.Field
	}
	if owner, ok, err := ContextOwner(w.Ctx); ok && err == nil {
		return layout.Field(w.core.ID, owner)
	}
	if w.Owner != "" {
		return layout.Field(w.core.ID, w.Owner)
	}
	w.Field = layout.Field(w.core.ID, w.core.anonymousOwner())
	return w.Field
}

// add puts r in the book (b.mu held).
func (b *waitBook) add(r *waitRecord) {
	b.live[r.field] = r
	if b.owners == nil {
		b.owners = make(map[string]*waitRecord)
	}
	r.sameOwner = b.owners[r.rec.Owner]
	b.owners[r.rec.Owner] = r
}

// remove takes r out of the book (b.mu held).
func (b *waitBook) remove(r *waitRecord) {
	delete(b.live, r.field)
	owner := r.rec.Owner
	if head := b.owners[owner]; head == r {
		if r.sameOwner == nil {
			delete(b.owners, owner)
		} else {
			b.owners[owner] = r.sameOwner
		}
	} else {
		for p := head; p != nil; p = p.sameOwner {
			if p.sameOwner == r {
				p.sameOwner = r.sameOwner
				break
			}
		}
	}
	r.sameOwner = nil
	if !r.left {
		r.left = true
		if r.over {
			b.ended.Add(-1)
		}
		if r.gone != nil {
			close(r.gone)
		}
	}
}

// end marks r's call as ended (over); it counts in ended until r leaves
// the book.
func (b *waitBook) end(r *waitRecord) {
	b.mu.Lock()
	r.over = true
	if !r.left {
		b.ended.Add(1)
	}
	b.mu.Unlock()
}

// endedWaits returns, for the records of owner's calls that waited for
// name and ended, still in the book (their delete not answered yet),
// channels closed once each leaves it. See Mutex.awaitEndedWaits.
func (b *waitBook) endedWaits(owner, name string) []chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []chan struct{}
	for r := b.owners[owner]; r != nil; r = r.sameOwner {
		if r.over && !r.left && r.rec.Name == name {
			if r.gone == nil {
				r.gone = make(chan struct{})
			}
			out = append(out, r.gone)
		}
	}
	return out
}

// ownWaits returns the records of owner's waits that are in the hash as
// far as the Client knows (written, and no delete sent), in the order of
// their fields, as the deadlock detector would read them from it. A look
// through one of the Client's own owners reads them here: from Redis it
// would read every record of the Client (HGETALL), and with N waiting
// calls, each looking once per delay, that is N records read N times per
// delay. sure is false when the Client does not know: a record of owner's
// running waits whose write was answered with an error (a lost reply: the
// record may be in the hash) is not written again yet.
func (b *waitBook) ownWaits(owner string) (recs []recordAt, sure bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for r := b.owners[owner]; r != nil; r = r.sameOwner {
		r.mu.Lock()
		doubt := r.answered && !r.ok && !r.deleting
		if r.ok && !r.deleting {
			recs = append(recs, recordAt{key: b.key, field: r.field, value: r.rec.Encode(), rec: r.rec})
		}
		r.mu.Unlock()
		if doubt {
			return nil, false
		}
	}
	slices.SortFunc(recs, func(x, y recordAt) int { return strings.Compare(x.field, y.field) })
	return recs, true
}

// RecordAfter is how long a call waits before it records its wait (see
// above), unless the deadlock detection delay is shorter.
const RecordAfter = 100 * time.Millisecond

// recordAfter is how long the Client's calls wait before they record it.
func (b *waitBook) recordAfter() time.Duration {
	if b.after > 0 && b.after < RecordAfter {
		return b.after
	}
	return RecordAfter
}

// recordDue is called after each refused attempt of a call that goes on
// waiting, and when its sleep's timer fires: the first sets when the wait
// began, and the call's record is written once it has lasted
// recordAfter. A call whose record is due and not written (a closed
// Client) writes none.
func (w *Wait) recordDue(now time.Time) {
	c := w.core
	if w.recordAsked || c.waits.off || w.Limit == 0 {
		return
	}
	if w.waitFrom.IsZero() {
		w.waitFrom = now
		w.recordAt = now.Add(c.waits.recordAfter())
	}
	if now.Before(w.recordAt) {
		return
	}
	w.recordAsked, w.recordAt = true, time.Time{}
	w.record()
}

// record starts writing w's record, once per call, for a call that has
// waited since w.waitFrom.
func (w *Wait) record() {
	c := w.core
	// The write's goroutine is one that Close waits for: counted only
	// while the Client is open (c.mu orders it before Close).
	c.mu.Lock()
	if c.CheckOpen() != nil {
		c.mu.Unlock()
		return
	}
	c.background.Add(1)
	c.mu.Unlock()
	r := &waitRecord{rec: waitrec.Record{Owner: w.recordOwner(), Name: w.Lock.Name, Kind: w.Lock.Kind},
		from: w.waitFrom.Sub(c.epoch)}
	if r.rec.Kind == "" {
		r.rec.Kind = "lock"
	}
	b := &c.waits
	b.mu.Lock()
	b.seq++
	r.field = strconv.FormatUint(b.seq, 10)
	b.add(r)
	lease := !b.leased
	b.leased = true
	b.mu.Unlock()
	if lease {
		c.addWaitLease()
	}
	w.rec = r
	if c.waits.after > 0 {
		// Counted from the wait's start, as the record's since is.
		w.detectAt = w.waitFrom.Add(c.waits.after)
	}
	go func() {
		defer c.background.Done()
		c.writeRecord(r)
	}()
}

// writeRecord sends r's write and, when the wait ended before its reply,
// its delete.
func (c *Core) writeRecord(r *waitRecord) {
	since, err := c.sendRecord(r)
	r.mu.Lock()
	if err == nil {
		r.ok, r.rec.Since = true, since
	}
	ended := r.ended
	r.answered = true
	if r.written != nil {
		close(r.written)
	}
	r.mu.Unlock()
	if ended {
		c.deleteRecord(r)
	}
}

// sendRecord sends r's write (lua/wait_record.lua), its since the wait's
// start: the server's time less how long the wait has lasted.
func (c *Core) sendRecord(r *waitRecord) (int64, error) {
	ctx, cancel := context.WithTimeout(c.root, releaseTimeout)
	defer cancel()
	e := c.recordExec(r)
	return lua.WaitRecord.Exec(ctx, c.RDB, e.Keys, e.Args).AsInt64()
}

// recordExec is r's write, as sent now.
func (c *Core) recordExec(r *waitRecord) rueidis.LuaExec {
	return rueidis.LuaExec{Keys: []string{c.waits.key},
		Args: []string{r.field, r.rec.Encode(), c.watchdogArg, strconv.FormatInt((time.Since(c.epoch) - r.from).Milliseconds(), 10)}}
}

// unrecord deletes w's record when its wait ends. A call that got what
// it waited for does not wait for the delete (an acquisition that waited
// returns as soon as it has the lock): it is sent on a goroutine of its
// own, at once when the record's write was answered, else by the write's
// goroutine once it is. While the owner holds the lock the record has no
// edge; the owner's last Unlock waits for the delete, for up to
// deleteTimeout, before it lets the lock go (Mutex.awaitEndedWaits): a
// record still in Redis once another owner holds the lock would read as
// a wait for that owner. A call that ends without it (gave up, its context
// ended, an error, a deadlock) deletes the record before it returns, for
// up to deleteTimeout: its caller goes on (releases, or keeps, what it
// holds), and a record still in Redis would read as a wait of its owner
// to the deadlock detector; past that bound, the delete goes on as for a
// call that got what it waited for.
func (w *Wait) unrecord(done bool) {
	r := w.rec
	if r == nil {
		return
	}
	w.rec = nil
	c := w.core
	c.waits.end(r)
	if !done {
		ctx, cancel := context.WithTimeout(c.root, deleteTimeout)
		defer cancel()
		select {
		case <-r.writtenChan():
			if c.deleteRecordOnce(ctx, r) == nil {
				return
			}
		case <-ctx.Done():
		}
	}
	r.mu.Lock()
	if !r.answered {
		r.ended = true
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	c.mu.Lock()
	if c.CheckOpen() != nil {
		// Close deletes the hash once the Client's goroutines are done.
		c.mu.Unlock()
		return
	}
	c.background.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.background.Done()
		c.deleteRecord(r)
	}()
}

// deleteRecordOnce sends r's delete once, on ctx, and forgets r when it
// succeeded.
func (c *Core) deleteRecordOnce(ctx context.Context, r *waitRecord) error {
	if err := r.beginDelete(ctx); err != nil {
		return err
	}
	err := c.RDB.Do(ctx, c.RDB.B().Hdel().Key(c.waits.key).Field(r.field).Build()).Error()
	if err == nil {
		c.waits.mu.Lock()
		c.waits.remove(r)
		c.waits.mu.Unlock()
	}
	return err
}

// deleteRecord sends r's delete. A record left in Redis reads as a live
// wait to the deadlock detector (of other Clients, and of this one when
// a look that found a cycle reads the hash), so a
// delete that fails is sent again every RetryBackoff, for up to a
// watchdog timeout; one that still fails (or that Close cut short) is
// left to the next tick's clean-up, or to Close.
func (c *Core) deleteRecord(r *waitRecord) {
	var err error
	var retry *time.Timer
	r.beginDelete(c.root)
	for give := time.Now().Add(c.WatchdogTimeout); ; {
		ctx, cancel := context.WithTimeout(c.root, releaseTimeout)
		err = c.RDB.Do(ctx, c.RDB.B().Hdel().Key(c.waits.key).Field(r.field).Build()).Error()
		cancel()
		if err == nil || time.Now().After(give) {
			break
		}
		if retry == nil {
			retry = time.NewTimer(RetryBackoff)
			defer retry.Stop()
		} else {
			retry.Reset(RetryBackoff)
		}
		select {
		case <-retry.C:
			continue
		case <-c.root.Done():
		}
		break
	}
	b := &c.waits
	b.mu.Lock()
	b.remove(r)
	if err != nil {
		b.dirty = true
	}
	b.mu.Unlock()
}

// deleteTimeout bounds Close's delete of the record hash.
const deleteTimeout = 250 * time.Millisecond

// waitLease is the watchdog value that renews the Client's wait record
// hash.
type waitLease struct{ c *Core }

// RenewCall renews the hash's expiry, deletes the records that are no
// longer live, and asks whether the written ones are still there (see
// Replied); with no live record and nothing to clean up it is empty
// (nothing is sent).
func (l waitLease) RenewCall(lease time.Duration) Call {
	b := &l.c.waits
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.live) == 0 && !b.dirty {
		return Call{}
	}
	b.dirty = false
	written := make([]string, 0, len(b.live))
	var others []string
	b.unwritten = false
	for f, r := range b.live {
		r.mu.Lock()
		ok := r.ok && !r.deleting
		if r.answered && !r.ok && !r.deleting {
			b.unwritten = true
		}
		r.mu.Unlock()
		if ok {
			written = append(written, f)
		} else {
			others = append(others, f)
		}
	}
	args := make([]string, 0, 3+len(b.live))
	args = append(args, strconv.FormatInt(Millis(lease), 10), strconv.FormatUint(b.seq, 10),
		strconv.Itoa(len(written)))
	args = append(args, written...)
	args = append(args, others...)
	return Call{Script: lua.WaitExpire, Keys: []string{b.key}, Args: args}
}

// Replied is told the tick's reply: 2 when a record of a running wait was
// missing from the hash, which the Client then writes again; so it does
// after any reply when the write of a running wait's record failed (the
// write is sent once the wait has lasted RecordAfter, whatever the state
// of Redis then: an outage that began after the wait did).
func (l waitLease) Replied(n int64) {
	b := &l.c.waits
	b.mu.Lock()
	unwritten := b.unwritten
	b.mu.Unlock()
	if n == 2 || unwritten {
		l.c.rewriteRecords(n == 2)
	}
}

// rewriteRecords writes again, on a goroutine of its own (one at a time),
// the records of the Client's running waits whose write was answered, as
// they were written (lua/wait_rewrite.lua): the hash lost them (it expired
// during an outage longer than the watchdog timeout, or was deleted), and
// their waits would otherwise be missing from the wait-for graph until
// they end. A record whose delete was sent is not carried, and the delete
// of one carried waits for the rewrite's reply (see beginDelete).
//
// With missing false (no record was missing, a write failed), only the
// records whose write failed are sent.
func (c *Core) rewriteRecords(missing bool) {
	b := &c.waits
	c.mu.Lock()
	if c.CheckOpen() != nil {
		c.mu.Unlock()
		return
	}
	b.mu.Lock()
	if b.rewriting {
		b.mu.Unlock()
		c.mu.Unlock()
		return
	}
	b.rewriting = true
	var carried, unwritten []*waitRecord
	args := []string{strconv.FormatInt(Millis(c.WatchdogTimeout), 10)}
	for _, r := range b.live {
		r.mu.Lock()
		switch {
		case r.deleting || r.rewrite != nil:
		case r.ok:
			if !missing {
				break
			}
			r.rewrite = make(chan struct{})
			carried = append(carried, r)
			args = append(args, r.field, r.rec.Encode())
		case r.answered:
			// Its write failed: sent again, as at first.
			r.rewrite = make(chan struct{})
			unwritten = append(unwritten, r)
		}
		r.mu.Unlock()
	}
	b.mu.Unlock()
	c.background.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.background.Done()
		if len(carried) > 0 {
			ctx, cancel := context.WithTimeout(c.root, releaseTimeout)
			// A rewrite that fails is sent again by the next tick, which
			// finds the records still missing.
			_ = lua.WaitRewrite.Exec(ctx, c.RDB, []string{b.key}, args).Error()
			cancel()
		}
		if len(unwritten) > 0 {
			// Sent at once (pipelined); one that fails again is sent
			// again after the next tick.
			execs := make([]rueidis.LuaExec, len(unwritten))
			for i, r := range unwritten {
				execs[i] = c.recordExec(r)
			}
			ctx, cancel := context.WithTimeout(c.root, releaseTimeout)
			res := lua.WaitRecord.ExecMulti(ctx, c.RDB, execs...)
			cancel()
			for i, r := range unwritten {
				if since, err := res[i].AsInt64(); err == nil {
					r.mu.Lock()
					r.ok, r.rec.Since = true, since
					r.mu.Unlock()
				}
			}
		}
		carried = append(carried, unwritten...)
		for _, r := range carried {
			r.mu.Lock()
			close(r.rewrite)
			r.rewrite = nil
			r.mu.Unlock()
		}
		b.mu.Lock()
		b.rewriting = false
		b.mu.Unlock()
	}()
}

// addWaitLease puts the wait record hash on the watchdog, at the Client's
// first record or after the watchdog lost it: renewed from then on until
// Close, each tick sending nothing while the Client has no record.
func (c *Core) addWaitLease() {
	if _, err := c.Watchdog.Add(c.WatchdogTimeout, waitLease{c}, c.lostWaitLease); err != nil {
		// Closed: the next record (there is none after Close) would put
		// it there again.
		c.waits.mu.Lock()
		c.waits.leased = false
		c.waits.mu.Unlock()
	}
}

// lostWaitLease is called when no renewal of the record hash succeeded
// for a whole watchdog timeout (an outage: the hash has expired, or is
// about to). While the Client has records (waits that run on through the
// outage), the hash is put back on the watchdog at once, so that the
// first tick that reaches Redis again finds their records gone and has
// them written again; else the next record puts it there.
func (c *Core) lostWaitLease(error) {
	b := &c.waits
	b.mu.Lock()
	again := len(b.live) > 0 || b.dirty
	b.leased = again
	b.mu.Unlock()
	if again {
		c.addWaitLease()
	}
}

// closeWaits deletes, at Close, the records left in the hash: every wait
// has ended or is ending, and a record whose delete could not be sent
// (the connection closing under it) would stay until the hash expires.
func (c *Core) closeWaits() {
	b := &c.waits
	b.mu.Lock()
	made := b.leased || b.dirty || len(b.live) > 0
	b.mu.Unlock()
	if !made || b.off {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	_ = c.RDB.Do(ctx, c.RDB.B().Del().Key(b.key).Build()).Error()
}
