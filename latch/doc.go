// Package latch implements Redisson's RCountDownLatch on Redis: a count
// set once, counted down by any process, that lets every waiter go on when
// it reaches 0. Get one with rlock.Client.GetCountDownLatch.
//
//	l := c.GetCountDownLatch("batch:7")
//	_, _ = l.TrySetCount(ctx, 3)   // by whoever starts the batch
//	...
//	_ = l.CountDown(ctx)           // by each of 3 workers when done
//	...
//	err := l.Await(ctx)            // until the count is 0
//
// # Redis layout
//
// The layout is Redisson's, so Java and Go processes share a latch:
//
//	<name>                                          string: the count; no key: 0 (open)
//	redisson_countdownlatch__channel__{<name>}      pub/sub: "0" when the count
//	                                                reached 0, "1" when a count
//	                                                was set
//
// and relock adds one key of its own, which Redisson ignores:
//
//	{<name>}:relock_opened                          string: the mark of the last
//	                                                opening (see Waiting); 10s TTL
//
// Note the channel: Redisson always wraps the name in braces there, even a
// name with a hash tag of its own, so for such a name ("jobs:{user:7}")
// the channel is in another cluster slot than the count. Classic PUBLISH
// does not mind; with rlock.WithShardedPubSub (SPUBLISH, which must stay
// in the slot) a latch name may not contain braces. The mark is in the
// name's slot ("jobs:{user:7}:relock_opened").
//
// CountDown deletes the key when it reaches 0 and publishes "0"; a latch
// at 0 can be set again. The count has no lease: a latch that nobody
// counts down stays closed until it is deleted. TrySetCount and CountDown
// are not resent after a lost reply (a resent CountDown would count
// twice); when they return a connection error, the outcome is unknown.
//
// TrySetCount fails with an error matching relock.ErrNameConflict, and
// sets nothing, while the name's other form ("a" for "{a}") is in use by
// any kind: a name and its other form derive the same keys for the other
// kinds, and are one key space.
//
// # Waiting
//
// Await never polls. It reads the count (with the mark, in one round
// trip): at 0 it returns, without subscribing. Otherwise it subscribes to
// the channel (one subscription per name per Client, shared by its
// waiters), reads again once Redis confirmed the subscription, and then
// sleeps until "0" is published, which lets every waiter of every Client
// go on (without reading the count again: the next batch's TrySetCount
// may already have set a new one), or until the subscription connection
// was lost and made again, after which it reads once more. Messages "1"
// wake nobody. A Client that already listens on the channel (another of
// its waiters is there, or was in the last 200ms) subscribes before the
// first read, at no cost.
//
// An opening that comes after the first read and before the subscription
// sends its "0" to nobody, and when a new count follows at once (the next
// batch), the read once subscribed finds that count: Redis keeps no
// record of an opening. relock leaves one: its CountDown that takes the
// count to 0, and its TrySetCount that finds no count (the latch was open
// until then, whoever opened it), write the mark: the server's time in
// microseconds, a value the mark never held, for 10s. A read that finds
// the mark changed since the first read (or there when it was not) tells
// the waiter that the latch opened in between, and it goes on. The same
// read after a lost subscription connection catches an opening made
// while the connection was down.
//
// So an opening after Await's first read is missed only when all of this
// holds: its "0" did not reach the waiter (it came before the waiter's
// subscription was in place, which on a Client's first subscription
// includes making its pub/sub connection, or while that connection was
// down, or just before it was lost); a new count was set before the
// waiter's next read; and no mark tells of it at that read, because both
// the opening and the new count were made by something other than relock
// (Redisson's countDown or delete, then Redisson's trySetCount; or raw
// commands), or because that read came more than 10s after the mark was
// written (a subscription that took that long, or a connection down that
// long). The waiter then waits for the next opening. An opening before
// the first read is one the waiter never saw the latch closed for: if
// the latch was set again by then, Await waits for the next, as if it
// had been called a moment later.
//
// One case goes the other way: an Await that joins its Client's
// subscription while the "0" of an opening that ended just before its
// first read is still on its way to that Client (a millisecond on a
// healthy network, a round trip on a slow one) goes on with that message,
// though the latch was set again before its first read: as if it had
// been called a moment earlier. The message carries nothing that tells it
// from a later opening (Redisson's waiters read "0" as an opening), and
// taking it for one keeps a waiter from missing Redisson's openings.
package latch
