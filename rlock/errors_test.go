package rlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/multilock"
	"github.com/relock-go/relock/rlock"
)

// TestErrorTexts: errors read once, on one line, and still match every
// sentinel and cause they carry.
func TestErrorTexts(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	holder := rlock.WithOwner(t.Context(), "holder")
	require.NoError(t, l.Lock(holder))
	defer l.Unlock(holder)
	waiter := rlock.WithOwner(t.Context(), "waiter")
	deadline := func() context.Context {
		ctx, cancel := context.WithTimeout(waiter, 30*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}

	cases := []struct {
		desc string
		err  error
		text string // the whole message; "" checks only its shape
		is   []error
	}{
		{"wait ended by its deadline", l.Lock(deadline()),
			"relock: not acquired: context deadline exceeded",
			[]error{rlock.ErrNotAcquired, context.DeadlineExceeded}},
		{"empty name", c.GetLock("").Lock(waiter),
			"relock: invalid argument: empty lock name",
			[]error{rlock.ErrInvalidArgument}},
		{"fair lock, empty name", c.GetFairLock("").Lock(waiter),
			"relock: invalid argument: empty lock name",
			[]error{rlock.ErrInvalidArgument}},
		{"MultiLock wait ended by its deadline", multilock.New(l, c.GetLock(relocktest.Name(t))).Lock(deadline()),
			"", []error{rlock.ErrNotAcquired, context.DeadlineExceeded}},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			require.Error(t, tc.err)
			msg := tc.err.Error()
			if tc.text != "" {
				assert.Equal(t, tc.text, msg, "the message")
			}
			assert.NotContains(t, msg, "\n", "the message must be one line")
			assert.NotContains(t, msg, "relock: relock:", "the message must not repeat its prefix")
			for _, want := range tc.is {
				assert.ErrorIs(t, tc.err, want)
			}
		})
	}
}

// TestNewClientDialError: a Client that cannot connect says where it tried.
func TestNewClientDialError(t *testing.T) {
	_, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:1"}, Password: "secret"})
	require.Error(t, err, "NewClient to a closed port")
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "relock: connect to 127.0.0.1:1: "), "NewClient error = %q, want it to name the address", msg)
	assert.NotContains(t, msg, "secret", "NewClient error must not show the password")
	var opErr interface{ Timeout() bool }
	assert.ErrorAs(t, err, &opErr, "NewClient error must unwrap to the dial error")
}
