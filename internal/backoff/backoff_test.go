package backoff_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/relock-go/relock/internal/backoff"
)

func TestDelay(t *testing.T) {
	ms := time.Millisecond
	exp := backoff.Policy{Min: 10 * ms, Max: time.Second}
	want := []time.Duration{10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	for i, w := range want {
		if got := exp.Delay(i + 1); got != w*ms {
			t.Errorf("exponential Delay(%d) = %v, want %v", i+1, got, w*ms)
		}
	}
	fixed := backoff.Policy{Min: 100 * ms}
	for n := 1; n < 5; n++ {
		if got := fixed.Delay(n); got != 100*ms {
			t.Errorf("fixed Delay(%d) = %v, want 100ms", n, got)
		}
	}
	jit := backoff.Policy{Min: 100 * ms, Jitter: true}
	for range 1000 {
		if got := jit.Delay(1); got < 50*ms || got >= 150*ms {
			t.Fatalf("jittered Delay = %v, want in [50ms, 150ms)", got)
		}
	}
}

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		done := make(chan struct{})
		start := time.Now()
		if !backoff.Sleep(done, time.Second) || time.Since(start) != time.Second {
			t.Errorf("Sleep(1s) = false or slept %v", time.Since(start))
		}
		if !backoff.Sleep(done, 0) {
			t.Error("Sleep(0) with done open = false")
		}
		time.AfterFunc(time.Second, func() { close(done) })
		start = time.Now()
		if backoff.Sleep(done, time.Hour) || time.Since(start) != time.Second {
			t.Errorf("Sleep ended by done = true or slept %v", time.Since(start))
		}
		if backoff.Sleep(done, 0) {
			t.Error("Sleep(0) with done closed = true")
		}
	})
}
