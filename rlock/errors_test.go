package rlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

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
	if err := l.Lock(holder); err != nil {
		t.Fatal(err)
	}
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
			if tc.err == nil {
				t.Fatal("no error")
			}
			msg := tc.err.Error()
			if tc.text != "" && msg != tc.text {
				t.Errorf("message = %q, want %q", msg, tc.text)
			}
			if strings.Contains(msg, "\n") || strings.Contains(msg, "relock: relock:") {
				t.Errorf("message %q is not one line, or repeats its prefix", msg)
			}
			for _, want := range tc.is {
				if !errors.Is(tc.err, want) {
					t.Errorf("errors.Is(%q, %v) = false", msg, want)
				}
			}
		})
	}
}

// TestNewClientDialError: a Client that cannot connect says where it tried.
func TestNewClientDialError(t *testing.T) {
	_, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:1"}, Password: "secret"})
	if err == nil {
		t.Fatal("NewClient to a closed port = nil error")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "relock: connect to 127.0.0.1:1: ") || strings.Contains(msg, "secret") {
		t.Errorf("NewClient error = %q, want it to name the address, and not the password", msg)
	}
	var opErr interface{ Timeout() bool }
	if !errors.As(err, &opErr) {
		t.Errorf("NewClient error %q does not unwrap to the dial error", msg)
	}
}
