package rlock_test

import (
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestWaitEndsWhenResubscribeRefused: a Lock waits while another owner
// holds; the Client's pub/sub connection is lost and, meanwhile, its
// user's ACL stopped allowing the lock's channel. The channel is refused
// when subscribed again: the waiting call ends with the refusal (as a
// call refused at its first subscription does) instead of sleeping on a
// channel it no longer hears.
func TestWaitEndsWhenResubscribeRefused(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	acl := func(args ...string) {
		t.Helper()
		require.NoError(t, raw.Do(t.Context(), raw.B().Arbitrary("ACL", "SETUSER", "limited").Args(args...).Build()).Error())
	}
	acl("on", ">pw", "~*", "resetchannels", "&*", "+@all")
	opt := srv.ClientOption()
	opt.Username, opt.Password = "limited", "pw"
	c, err := rlock.NewClient(opt)
	require.NoError(t, err)
	defer c.Close()
	name := relocktest.Name(t)
	l := c.GetLock(name)
	a, b := rlock.WithOwner(t.Context(), "a"), rlock.WithOwner(t.Context(), "b")
	require.NoError(t, l.Lock(a))
	res := make(chan error, 1)
	go func() { res <- l.Lock(b) }()
	relocktest.Eventually(t, 10*time.Second, "b's wait subscribed", func() bool {
		n, err := raw.Do(t.Context(), raw.B().PubsubNumsub().Channel(layout.Channel(name)).Build()).AsIntMap()
		return err == nil && n[layout.Channel(name)] == 1
	})
	acl("resetchannels", "&other:*")
	_ = raw.Do(t.Context(), raw.B().ClientKill().TypePubsub().Build()).Error()
	err = relocktest.Receive(t, res, 10*time.Second, "b's Lock")
	require.ErrorContains(t, err, "NOPERM", "b's Lock")
	var re *rueidis.RedisError
	require.ErrorAs(t, err, &re, "b's Lock: the server's reply is in the chain")
	held, err := l.IsHeldByOwner(b)
	require.NoError(t, err)
	require.False(t, held, "b holds after its Lock failed")
	acl("resetchannels", "&*") // a's release publishes on the channel
	require.NoError(t, l.Unlock(a))
}
