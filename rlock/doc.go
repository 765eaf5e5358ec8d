// Package rlock implements reentrant distributed locks on Redis in the
// style of Redisson's RLock, on top of github.com/redis/rueidis.
//
// A Client is the entry point: it owns a rueidis client (or uses yours),
// one watchdog goroutine that renews leases, and one pub/sub connection on
// which waiters sleep. Handles from GetLock are cheap and do no I/O.
//
//	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
//	if err != nil { ... }
//	defer c.Close()
//	l := c.GetLock("orders:42")
//	if err := l.Lock(ctx); err != nil { ... }
//	defer l.Unlock(ctx)
//
// # Owners
//
// The owner of a hold travels in the context: ctx = rlock.WithOwner(ctx,
// "job-42"). Every call made with that context, on any handle of the same
// Client and from any goroutine, is the same owner, so taking a lock it
// holds re-enters it and raises its hold count; each Unlock releases one
// level. The owner's calls on one lock reach Redis one at a time, so
// goroutines that share an owner may lock and unlock concurrently: a
// waiting Lock of the owner re-enters as soon as another goroutine of the
// owner got the lock.
//
// A context without an owner gets a fresh owner for each acquisition, so
// the lock then behaves like sync.Mutex keyed by name on its Client (not
// reentrant): an Unlock without an owner, on any handle of that name,
// releases the Client's current anonymous hold of it. An anonymous hold
// on a fixed lease that runs out, and that nobody watches, is reported
// lost when the Client's next ownerless hold of the lock replaces it (a
// watched one ends at its lease). Owners of the form "anon-<n>"
// are reserved for the owners relock makes up.
//
// # The promise
//
// A Lock that returned nil is held until its Unlock, or until its loss is
// reported: Done closes, HoldContext ends with ErrLockLost, Do's context is
// cancelled and Do returns ErrLockLost, and the handler of WithLostHandler
// runs. No interleaving of the owner's goroutines, no panic in Do's
// function (the lock is released, and the panic goes on), no lost reply
// and no cancelled context ends a hold silently. A call that fails leaves
// nothing behind in Redis: an acquisition whose context ends while its
// script is in flight gives back what the script won, and one whose reply
// was lost takes back, before it returns, the level it may have won.
//
// # Redis layout
//
// The layout is Redisson's, so a Go process and a Java process using
// Redisson exclude each other on the same lock name:
//
//	<name>                             hash: "<clientID>:<owner>" -> hold count
//	redisson_lock__channel:{<name>}    pub/sub: "0" published at each release
//	redisson_lock_token:{<name>}       fencing counter of a FencedLock
//
// A name that already contains "{" is not wrapped again (prefix:<name>), so a
// user's own hash tag decides the slot. Every key a script touches shares
// the lock's hash slot. Scripts only use HSET, HDEL, PEXPIRE, PTTL and
// PUBLISH on the hash, and leases are relative (PEXPIRE on the server).
//
// With WithKeyPrefix(p), <name> above (and in every kind's layout) is
// p+name, as a Redisson client whose NameMapper prepends p makes it; a
// handle's Name is still the name it was asked for.
//
// # One name, one key space; one hash, one kind
//
// Because a name with "{" is not wrapped, the names "a" and "{a}" derive
// the same keys and channels (the unlock channel, a fenced lock's
// counter, a fair lock's queue, a semaphore's permits) and differ only in
// the key under the name itself. Every script that creates or takes state
// under a name (an acquisition or re-entry of any lock kind, a
// semaphore's or a counting semaphore's set, add or acquire, a rate
// limiter's calls, a latch's set) looks at that key of the other form, in
// the same slot, and refuses while it exists: the call
// returns an error matching ErrNameConflict that names both names, having
// changed nothing, and a waiting call ends at once with it. A name that is
// itself another name's derived key ("redisson_lock_queue:{a}",
// "{a}:timeout") is refused as ErrInvalidArgument.
//
// The hash of a reentrant lock (plain, fenced or fair) and of a read-write
// lock look alike to HINCRBY. A plain, fenced or fair acquisition (or
// re-entry) that finds a read-write lock's hash (its "mode" field), a
// read-write lock's that finds a lock's hash without it, a plain or
// fenced acquisition that finds a fair lock's queue of waiters beside the
// name, and a lock and a rate limiter that find each other's hash (the
// rate limiter's has a "rate" field), refuse as WRONGTYPE does across
// data types: the error matches
// ErrWrongKind and names the kind found. Redisson's scripts make neither
// check: a Java process that uses both forms of a name, or two kinds on
// one name, is not refused.
//
// # Leases and the watchdog
//
// Lock, and TryLock with lease 0, hold on the watchdog lease (30s by
// default, WithWatchdogTimeout). The Client's watchdog renews it every
// third of that while the owner holds the lock, and stops, synchronously,
// at the final Unlock. If a renewal finds the hold gone, or none succeeds
// before the lease runs out, the hold is lost: Do's context is cancelled
// with a cause matching ErrLockLost, the channel from Done closes, and the handler of
// WithLostHandler runs. A fixed lease (LockLease, TryLock with lease > 0) is
// never renewed: a hold that someone watches (Done, HoldContext, a Hold's
// Context) ends when its lease ends, by a timer of the Client (no call to
// Redis), counted from when the acquisition, or the latest re-entry or
// partial release (which reset the lease), was sent, so that it never
// looks held after Redis may have let it go; it is reported lost like any
// other loss. One nobody watches is found ended at its owner's next call.
// Close stops every renewal; locks still held then expire.
//
// # Waiting
//
// A waiter never polls. After a failed attempt it subscribes to the lock's
// channel (one subscription per name per Client, shared by all its local
// waiters), tries again, and sleeps until an unlock message, the holder's
// remaining lease as its attempt saw it (a crashed holder publishes
// nothing), or its context's end. Each unlock wakes one local waiter; a
// waiter that took a wake-up and gives up without using it passes it on.
// A re-entry that makes the lease shorter publishes "1", which wakes every
// waiter, so that none sleeps past the new end. A Lock's or FencedLock's
// waiter never sleeps more than 1s plus a random part of it (under 2s)
// without looking again, whatever the lease: a release that publishes
// nothing (that of Redisson's RSpinLock, which shares the lock's hash)
// costs it at most 2s. Every kind of relock waits through this same loop
// (fairlock, rwlock, semaphore and latch too).
//
// A SpinLock (GetSpinLock, Redisson's RSpinLock) has Lock's layout and
// methods, but its waiters do not subscribe: between attempts they sleep
// a backoff (1ms, doubling with jitter, at most 128ms; never past the
// holder's lease end), and its holds do not listen on the lock's channel.
// Its release publishes as Lock's does (Redisson's spin lock publishes
// nothing), so the plain lock's waiters on the name go on at once.
//
// A wait (TryLock's, TryDo's, TryAcquire's, a semaphore's TryAcquire)
// ends only the sleeping between attempts: an attempt that was sent
// counts. However short the wait, the call makes the attempt wait 0
// makes, and an attempt sent before the wait ended is not abandoned when
// it ends: its reply decides, and a grant that comes back after the wait
// ended is the caller's success (it asked for the lock). A wait shorter
// than a round trip therefore takes a free lock as wait 0 does, and a
// call may return up to a round trip after its wait (when Redis does not
// answer, when the connection gives up: 10s by default). The context is
// not a wait: when it ends, an attempt in flight is abandoned, and what
// its reply won is given back; give it a deadline to bound a call.
//
// Liveness is promised like safety: when the lock becomes free, a waiter
// goes on within a round trip of the release or ForceUnlock that freed it;
// when its holder died, within a round trip of the end of the holder's
// lease (the watchdog timeout, 30s by default, for a hold on the watchdog
// lease). With WithWakeOne the same holds for the waiters that are not
// registered (the release tells them on the lock's channel, always); a
// Client that closed left the wake registry at once, one whose waiters
// all gave up too, and one that died is dropped by the next release (its
// wake channel has no subscriber left); a registrant that lives but
// cannot act (a stopped process) delays the other registered waiters by
// at most 2s. The bounds of the other kinds are in their packages.
//
// # Waits and deadlocks
//
// Every waiting call of every kind (a lock's Lock and TryLock with a
// wait, both sides of a read-write lock, a fair or spin lock, both
// semaphores, a rate limiter, a latch's Await) that has waited 100ms (the
// deadlock detection delay, when that is shorter) is recorded in Redis:
// who waits (its owner, as the lock's hash
// names a holder, "<clientID>:<owner>"; a call without an owner in its
// context is recorded under the owner the Client made up for it), for
// what (the name with the key prefix, the kind), and since when (the
// server's time when the wait began). The records of a Client are one hash,
// relock_waits:{<clientID>} (after the key prefix), one field per call; the
// call deletes its record when its wait ends, however it ends (acquired,
// the wait or the context over, Close, an error). relock status, relock
// waits and relock top show them beside the holders. A call that gets
// what it asked for at its first attempt, a single attempt (wait 0) and a
// wait shorter than 100ms (most hand-offs of a busy lock) send nothing
// more; a longer wait sends one command more once it has lasted 100ms
// (the record, HSET and PEXPIRE in one script, sent while the call
// sleeps, whose reply it does not wait for) and
// one at its end (HDEL: not waited for by an acquisition that got what it
// waited for; with a detection delay under 1s its owner's last Unlock
// of that lock waits for it, for up to 250ms, before it lets the lock
// go: once another owner holds it, the record would read as a wait for
// that owner, and a look a short delay later could see a cycle that is
// not there; a call that ends
// without it deletes its record before it
// returns, for up to 250ms, so that its owner does not read as waiting
// once it goes on). The hash expires after the watchdog timeout;
// the Client renews it on the watchdog's tick while it has records (one
// call per Client per tick, pipelined with the holds' renewals), so the
// records of a Client that died expire on their own. A record's write or
// delete that fails does not fail the wait: the wait is then not shown
// (and is no part of deadlock detection) until the write is sent again,
// after the next tick that Redis answers, or shown while its delete is
// sent again (every 100ms, for up to the watchdog timeout), then until
// the next tick (which deletes what the Client no longer has) or the
// hash's expiry: meanwhile it reads as a wait, to the deadlock detector
// too. Redisson's waiters leave no record: status
// shows nothing of them, as it shows their holders (whose fields name
// Redisson's clients).
//
// A wait that has lasted the deadlock detection delay (1s by default,
// WithDeadlockDetection) looks for a cycle of owners through itself: the
// owners that hold the name it waits for (the fields of a plain, fenced,
// fair or spin lock's hash, both sides of a read-write lock), what each of
// them waits for (its Client's records with that owner: for an owner of
// the looking Client, what that Client knows it wrote there and has not
// deleted, so that N waiting calls of one Client do not each read all N
// records; a look that finds a cycle reads the hash before it names the
// victim, as other Clients read it; another Client's hash is read once
// for the looks of a Client that need it within 100ms, or a tenth of the
// delay), their holders, and so on: every owner its wait leads to, of
// which those that lead back
// to its own owner hold every cycle through it (its strongly connected
// set); across Clients, processes and lock kinds, of any length, reading
// each key on its own (names may be in different Cluster slots), at most
// 64 keys a look (a cycle of up to 30 owners on as many Clients; a larger
// graph is not judged). It looks again every delay while it waits (cycles
// form after a wait began). Exactly one wait of a set ends: the one whose
// record is the youngest (the latest since; ties by owner, then by
// record) of those whose end leaves no cycle in the set (where cycles
// overlap, as through several readers of a read-write lock, the wait they
// all share), else the youngest, which every member names alike from the
// records it reads; only that wait ends itself, and only after it read the cycle's edges again (each
// record still there and unchanged, each holder still holding), so that
// a chain that is only long, or that changed while it was read, ends
// nothing. Its call returns an error matching ErrDeadlock and
// ErrNotAcquired that names the cycle's owners and names; it holds
// nothing more than before the call. Its caller releases what it holds
// (as after a database's deadlock error), and the others go on. It tries
// again after a short random pause: a plain lock is not fair, and a retry
// at once can take back what it just released before the owner it
// released it for hears of it, and meet the same cycle, as its youngest
// wait again.
//
// Owners are threads of control, as a database's transactions are: an
// owner that waits is taken to keep what it holds until its wait ends.
// Goroutines that share an owner (it travels in the context) are one
// owner to the detector: when goroutine 1 of owner O holds L1 and would
// release it, and goroutine 2 of O waits for L2, held by P, which waits
// for L1, the cycle through O is reported and one wait ends. Give
// goroutines that take locks on their own owners of their own. An owner
// that holds a read-write lock's read side and waits for its write side
// waits for itself (a cycle of one): it ends after the delay. A semaphore,
// counting semaphore, rate limiter or latch is in no cycle: its waiter
// waits for any one permit (any holder's release, or a lease's end), for
// anyone's count-down, or for time, not for an owner; a chain through one
// ends there, and a cycle through one is not seen. A Client's wait record
// hash lost while its waits run (expired during an outage longer than the
// watchdog timeout, or deleted) is written again at its next tick. A hold on a fixed
// lease counts while it lasts. A Client with detection off (0) still
// records its waits, but never ends one, even one its cycle chose: turn
// detection off in every Client that shares locks, or in none.
//
// # Waking one process per release
//
// With WithWakeOne, a Client whose waiter goes on waiting registers in the
// lock's wake registry (relock_wakers:{name}, a sorted set beside the
// lock: client ID -> the end of its registration) and listens on its own
// wake channel (relock_wake:{name}:<clientID>). A release by a Client with
// the option wakes the live Client that registered longest ago (each
// attempt registers again, so the turn goes round), on its wake channel,
// then publishes "2" and the unlock message "0" on the lock's channel,
// always: the "0" wakes the waiters that are not registered (Redisson's,
// which ignore the "2", and those of Clients without the option), however
// many subscribe, and a Client with registered waiters lets a "0" that
// follows a "2" pass, so that only the Client woken on its own channel
// tries. A Client woken with no waiter left hands the wake-up on. A Client
// whose last waiter gives up leaves the registry at once, as does one
// that closes; one that died is dropped by the next release, which finds
// no subscriber on its wake channel. One that lives but cannot act (a
// stopped process) swallows the wake-ups meant for it until its
// registration ends, 3s after its last attempt: registered waiters
// therefore try again after 1s to 2s without a wake-up, so such a lock is
// taken within 2s of its release by a live waiter (within 5s when the
// release granted it to that Client: see Grant on release); a waiter that
// is not registered is woken by the release itself. On Redis Cluster the option
// needs WithShardedPubSub: a release learns whether a registered Client
// still listens by counting its wake channel's subscribers, which is
// right only on the node that serves the channel's slot.
//
// # Grant on release
//
// When the last Unlock of a Lock or a FencedLock frees it and a goroutine
// of the same Client waits for it (asleep, its owner holding nothing of
// the lock), the release hands the lock over in Redis itself: the unlock
// script deletes the releaser's field and writes the waiter's (count 1,
// and for a FencedLock a new token from the counter, as an acquisition
// takes one) instead of publishing, and the Client hands the hold to the
// waiter in the process. The waiter makes no attempt of its own: the hand-
// off costs the release's round trip alone. The oldest such waiter of
// another owner is chosen. It happens only while no other client waits:
// the script grants only when the lock's channel has no subscriber but
// the releasing Client (PUBSUB NUMSUB, SHARDNUMSUB with WithShardedPubSub).
// A waiter of another Client or of Redisson subscribes before its second
// attempt, and from then on every release publishes as without grants, so
// a Client's goroutines cannot keep the lock among themselves while
// another subscribed waiter waits for it. (On Redis Cluster with classic
// pub/sub, NUMSUB counts one node's subscribers: use WithShardedPubSub
// there.) A caller that never subscribes to the lock's channel (a
// SpinLock's waiter, a caller that polls TryLock with wait 0) is
// recorded, by each attempt that finds the lock held, in
// relock_knocks:{<name>} for 2.5s (its own Client remembers a refused
// TryLock with wait 0): meanwhile the releases of every other Client
// publish as without grants, so it finds the lock free as often as with
// grants off. Known limits: Redisson's RSpinLock leaves no such record,
// and a waiter of a Client on classic pub/sub is not counted by one on
// sharded pub/sub (a mix WithShardedPubSub does not support); while a
// Client's goroutines take turns by grants without a pause the lock is
// never free for them. Turn grants off (WithoutGrantOnRelease) on Clients
// that share names with Redisson spin locks.
//
// A fair lock (GetFairLock) grants by its queue's rule instead: its last
// Unlock grants it to a sleeping goroutine of the same Client only when
// that goroutine heads the queue (after the dead are pruned), taking it
// out of the queue as its acquisition would, whoever else waits behind;
// any other head is woken as before (package fairlock). The Client offers
// its fair waiters to its releases in the order they queued. Such a
// grant publishes relock's mark "3" on the lock's channel for relock top;
// no fair waiter listens there.
//
// A granted hold's lease in Redis is a confirmation window, 3s (or the
// waiter's own lease when that is shorter), until the Client confirms it a
// third of the window later: on the watchdog lease by bringing the hold's
// renewal forward, on a fixed lease by setting the rest of it (publishing
// "1" on the lock's channel when that is shorter than the lease left, so
// that waiters that read the longer one look again). A process
// that dies between the grant and the confirmation keeps the lock from
// others for at most the window; a hold released before then needs no
// confirmation. Until it is confirmed, the Client counts the hold as ending
// a tenth of the window before the window does: a confirmation that gets
// no reply is sent again every 250ms, and one not answered in time ends the
// hold as lost (reported as any loss) before Redis could grant the lock to
// another. A waiter whose context ends or whose Client closes while its
// grant is on its way returns at once, as it would have; the releasing
// call gives back what it granted to it (a release, which wakes the next
// waiter), and goes on giving it back in the background until the window
// ends if Redis does not answer. A grant claimed for an owner whose hold
// has changed since (another call of the owner took the granted field over
// and let it go) is not taken: the call waits on. One whose wait limit runs
// out meanwhile takes it, as it takes what an attempt sent before the
// limit won. A waiter that takes it returns nil, as after an acquisition
// that waited (the observer sees one). When the release's reply is lost, the waiter's
// next attempt takes over a grant that was made, and a waiter that gives
// up then removes it. WithoutGrantOnRelease turns it off: every release
// publishes and the woken waiter acquires, as Redisson's do.
//
// With WithWakeOne, a release also grants across Clients. A registered
// waiter's refused attempt records, beside its Client's registration, the
// grant a release may make to it (relock_grantees:{<name>}, a hash: client
// ID -> the waiter's field, kind, window, and the attempt's time on its
// Client's clock). A release that frees the lock and whose turn falls to
// a registered Client writes that waiter's field (count 1, the window as
// its lease, a token for a FencedLock) instead of waking the Client, and
// publishes the grant on the Client's wake channel; the entry is used up.
// It does so only when every subscriber of the lock's channel is a live
// registered Client (no Redisson waiter and no Client without the option
// waits, nor does relock top watch: otherwise it wakes as above; a
// Client stays subscribed to the lock's channel while it listens on its
// wake channel, so that every live registration counts as one
// subscriber) and no Client was refused the lock lately. An entry that no
// Client could have written (another Client's field, a window over 3s) is
// used up without a grant, and so is one of the name's other form ("x"
// for "{x}", which share the grantees). No release grants while a fair
// lock's queue is beside the lock (a plain acquisition is refused there). A Client that leaves the registry, or is
// dropped from it, loses its entry too. A release that grants publishes
// nothing on the lock's channel, so that the server writes to the granted
// Client at once, not after every waiting Client; the granted Client
// publishes "3" there for those who watch the lock. The Client that
// hears the grant hands it to the waiter if that waiter still sleeps after
// the attempt the entry came from, with no other call of its owner since,
// and within three quarters of the window of that attempt; the hold's lease counts from
// the attempt (an earlier moment than the grant), and the Client confirms
// it within the window as above. A grant that reaches the Client before
// the waiter has read its attempt's reply (the two come on different
// connections) is kept for that waiter, which takes it as it goes to
// sleep; if the waiter goes on otherwise (it attempts again, or its call
// ends) the grant is given back then, and at the latest three quarters of
// the window after the attempt. Otherwise it gives the grant back at once
// (the owner's count goes back to what the owner holds, which frees the
// lock and wakes the next Client). A grant to a Client that died or whose
// process is stopped holds the lock for the window (3s): the other
// registered waiters try again within 2s, so they get it within 5s of the
// release.
//
// # Failures
//
// A waiting call (Lock, LockLease, TryLock with wait > 0) rides out a
// dropped connection, a failover and error replies that mean the script did
// not run (LOADING, READONLY, BUSY, OOM; on Redis 6, the ERR that quotes
// a script's refused write): it retries every 100ms until its wait ends,
// and then returns the last failure with ErrNotAcquired. A single attempt
// returns the failure at once. Every script that changes a
// hold moves its count one level with HINCRBY, as Redisson's do, but only
// from the count the Client expects before the call, to the one it expects
// after (1 for a first acquisition, the count the Client granted plus one
// for a re-entry, minus one for an unlock); a count already at the target
// is an earlier send of the same request. So a request resent after a lost
// reply has the effect of one request, and an acquisition that ends
// without the lock brings the count back to what the owner was granted. A re-entry whose hold turns out to
// be gone reports that hold lost (Done, Do, WithLostHandler) and acquires
// anew. No unlock writes anything but the hold itself: there are no latch
// keys to leave behind.
//
// # Observing
//
// WithObserver gives a Client an Observer (package observe) that is told
// of every acquisition and release (with a start, so that a tracer can
// put a span around each), every hold from its start to its end
// (released, lost or closed), every renewal and every wait; the module
// github.com/relock-go/relock/relockotel records them as OpenTelemetry
// metrics and spans. WithLogger logs a waiting acquisition's outage (one
// WARN when its attempts start failing, one INFO when Redis answers again)
// and every lost hold (ERROR), and nothing while the locks work. Without
// either, relock builds no event and the calls cost nothing more.
//
// Those events are of a Client's own locks. Watch, on any lock handle,
// tells who takes and leaves a lock whoever holds it (other Clients,
// Redisson): releases are heard on the lock's channel, acquisitions and
// expiries only from the server's keyspace notifications when they are on
// (a watch never turns them on, and never polls); see handle.Mutex.Watch
// for what it hears and what it costs.
//
// # Safety
//
// A lease can run out while its holder is paused (a long GC, swapping, a
// stopped VM) or cut off from Redis, and another owner then takes the lock
// while the first still believes it holds it. A Redis failover can also
// lose a recent acquisition. The lock alone therefore cannot protect a
// resource from a late write: use a FencedLock and have the resource
// reject writes whose token is older than one it has seen.
package rlock
