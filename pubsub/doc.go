// Package pubsub implements a shared Redis Pub/Sub hub: many local waiters
// on many channels are served by a single subscription connection.
//
// A [Hub] owns one rueidis dedicated connection. Channels are reference
// counted: the first local [Waiter] of a channel makes the hub send
// SUBSCRIBE, and [Hub.Subscribe] returns only once the server has confirmed
// it, so a PUBLISH issued after Subscribe returned is seen by the waiter.
// When the last waiter of a channel leaves, the channel stays subscribed for
// a short linger (see [Options.Linger]) before UNSUBSCRIBE is sent, so that
// waiters coming and going do not make the hub subscribe and unsubscribe on
// every turn.
//
// Messages never block the connection's reader. A waiter is woken by a
// non-blocking send into its one-slot channel ([Waiter.C]), so several
// notifications that arrive before the waiter looks collapse into one.
// Which waiters a message wakes is decided by [Options.Policy]: the oldest
// waiter of the channel ([WakeOne]), all of them ([WakeAll]), none
// ([Ignore]), or none, and none for the next message on the channel either
// if it would wake one ([Mute]). The hub itself knows nothing about what
// the messages mean.
//
// When the connection drops, every waiter is woken at once (a message may
// have been lost), the hub reconnects with a short backoff, subscribes again
// every channel that still has waiters, and wakes the waiters of each such
// channel once more when its subscription is back. A channel the server
// refuses then (its user's ACL changed meanwhile) wakes its waiters with
// the refusal in [Waiter.Err]: they hear nothing more on it.
package pubsub
