package lockcore

import (
	"context"

	"github.com/relock-go/relock/observe"
)

// ObserveRelease runs fn, a release of something the Client keeps no
// hold record of (a counting semaphore's permits), with the observer told
// of its start and end: owner names the call, and Held is 0.
func (c *Core) ObserveRelease(ctx context.Context, lock observe.Lock, owner string, fn func(context.Context) error) error {
	if c.obs == nil || c.obs.o == nil {
		return fn(ctx)
	}
	return c.obs.release(ctx, lock, owner, 0, fn)
}
