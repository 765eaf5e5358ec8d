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
// Note the channel: Redisson always wraps the name in braces there, even a
// name with a hash tag of its own, so for such a name ("jobs:{user:7}")
// the channel is in another cluster slot than the count. Classic PUBLISH
// does not mind; with rlock.WithShardedPubSub (SPUBLISH, which must stay
// in the slot) a latch name may not contain braces.
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
// Await never polls. It reads the count, subscribes to the channel (one
// subscription per name per Client, shared by its waiters), reads the
// count again (so a 0 reached meanwhile is not missed), and then sleeps
// until "0" is published, which lets every waiter of every Client go on
// (without reading the count again: the next batch's TrySetCount may
// already have set a new one), or until the subscription connection was
// lost and made again, after which it reads the count once more.
// Messages "1" wake nobody. So a waiter goes on within a round trip of the
// CountDown that opened the latch, unless its subscription connection was
// down at that moment and a new count was set before it read again: Redis
// keeps no record of an opening, and the waiter then waits for the next.
package latch
