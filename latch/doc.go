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
// # Waiting
//
// Await never polls. It subscribes to the channel (one subscription per
// name per Client, shared by its waiters), waits until Redis confirmed the
// subscription, and only then reads the count: at 0 it returns; otherwise
// it sleeps until "0" is published, which lets every waiter of every
// Client go on (without reading the count again: the next batch's
// TrySetCount may already have set a new one), or until the subscription
// connection was lost and made again, after which it reads the count once
// more. Messages "1" wake nobody. Because the subscription comes first, an
// opening that Redis runs once the subscription is in place is not missed,
// even when a new count follows it at once: the read sees 0, or the "0"
// message reaches the waiter.
//
// An opening is missed only when a new count is set before the waiter's
// next read and the opening's "0" does not reach the waiter: the opening
// came before the waiter's SUBSCRIBE reached Redis (the Await has read
// nothing yet then; but on a Client that has no pub/sub connection yet,
// the SUBSCRIBE waits for one to be made, a connection and its handshake,
// so such an opening may come that long after Await was called), or the
// subscription connection was down at that moment (lost, or failing to be
// made), or was lost before the message reached the Client. The waiter
// reads again once it is subscribed anew; Redis keeps no record of an
// opening, so it then waits for the next.
//
// Subscribing first costs a round trip before the read, also when the
// latch is open, unless the Client already listens on the channel (it has
// another waiter of the latch, or had one in the last 200ms); then Await
// is one read.
package latch
