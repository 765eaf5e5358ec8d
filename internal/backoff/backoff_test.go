package backoff_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/backoff"
)

func TestDelay(t *testing.T) {
	ms := time.Millisecond
	exp := backoff.Policy{Min: 10 * ms, Max: time.Second}
	want := []time.Duration{10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	for i, w := range want {
		assert.Equal(t, w*ms, exp.Delay(i+1), "exponential Delay(%d)", i+1)
	}
	fixed := backoff.Policy{Min: 100 * ms}
	for n := 1; n < 5; n++ {
		assert.Equal(t, 100*ms, fixed.Delay(n), "fixed Delay(%d)", n)
	}
	jit := backoff.Policy{Min: 100 * ms, Jitter: true}
	for range 1000 {
		got := jit.Delay(1)
		require.GreaterOrEqual(t, got, 50*ms, "jittered Delay")
		require.Less(t, got, 150*ms, "jittered Delay")
	}
}

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		done := make(chan struct{})
		start := time.Now()
		assert.True(t, backoff.Sleep(done, time.Second), "Sleep(1s) with done open")
		assert.Equal(t, time.Second, time.Since(start), "time Sleep(1s) slept")
		assert.True(t, backoff.Sleep(done, 0), "Sleep(0) with done open")
		time.AfterFunc(time.Second, func() { close(done) })
		start = time.Now()
		assert.False(t, backoff.Sleep(done, time.Hour), "Sleep ended by done")
		assert.Equal(t, time.Second, time.Since(start), "time Sleep slept until done")
		assert.False(t, backoff.Sleep(done, 0), "Sleep(0) with done closed")
	})
}
