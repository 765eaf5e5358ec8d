package rlock_test

import (
	"context"
	"log"

	"github.com/relock-go/relock/rlock"
)

// ExampleLock_Watch is the operations page's code, compiled; it is not
// run (it reaches for a Redis on 127.0.0.1:6379).
func ExampleLock_Watch() {
	var c *rlock.Client
	watch := func(ctx context.Context) error {
		// README begin
		w, err := c.GetLock("orders:42").Watch(ctx)
		if err != nil {
			return err
		}
		defer w.Stop()
		for ev := range w.Events() { // closed when the watch ends
			log.Printf("%s by %s (client %s)", ev.Type, ev.Owner, ev.ClientID) // acquired, released, expired, vanished
		}
		// README end
		return nil
	}
	_ = watch
}
