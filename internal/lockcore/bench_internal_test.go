package lockcore

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkModelLockUnlockParallel measures the Client's own work for an
// ownerless Lock and Unlock on the watchdog lease (hold records, the wait
// loop, the watchdog registration), on the model of Redis: what relock
// costs beyond the scripts' round trips.
func BenchmarkModelLockUnlockParallel(b *testing.B) {
	m := newModel()
	c, err := NewCore(Config{RDB: noRedis{}, WatchdogTimeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.subscribeHook = m.hub.subscribe
	c.renewHook = m.renew
	c.waits.off = true // the model has no wait records
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		x := NewMutex(c, "x"+strconv.FormatInt(next.Add(1), 10), m)
		ctx := b.Context()
		for pb.Next() {
			if err := x.Lock(ctx); err != nil {
				b.Error(err)
				return
			}
			if err := x.Unlock(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
