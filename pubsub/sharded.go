package pubsub

import (
	"context"
	"sync"

	"github.com/redis/rueidis"
)

// sharded is sharded pub/sub: one SSUBSCRIBE receiver per channel, each
// on the connection rueidis picks for the channel's slot. A receiver that
// fails makes the whole conn broken, so the hub's usual recovery (wake
// everyone, subscribe again, wake again) covers it.
type sharded struct {
	h      *Hub
	ctx    context.Context // ends at close
	cancel context.CancelFunc
	errs   chan error // 1-buffered: the first failure
	wg     sync.WaitGroup

	mu    sync.Mutex
	recvs map[string]*receiver
}

type receiver struct {
	cancel    context.CancelFunc
	confirmed chan struct{} // closed when the server confirmed SSUBSCRIBE
	done      chan struct{} // closed when Receive returned
	err       error         // why Receive returned (valid after done)
}

func newShardedConn(h *Hub) *sharded {
	ctx, cancel := context.WithCancel(h.ctx)
	return &sharded{h: h, ctx: ctx, cancel: cancel, errs: make(chan error, 1), recvs: make(map[string]*receiver)}
}

func (s *sharded) subscribe(ctx context.Context, names []string) error {
	started := make([]*receiver, 0, len(names))
	s.mu.Lock()
	for _, name := range names {
		if r := s.recvs[name]; r != nil {
			started = append(started, r)
			continue
		}
		r := s.start(name)
		s.recvs[name] = r
		started = append(started, r)
	}
	s.mu.Unlock()
	for _, r := range started {
		select {
		case <-r.confirmed:
		case <-r.done:
			if r.err != nil {
				return r.err
			}
			return errConnClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// start runs one receiver. s.mu is held.
func (s *sharded) start(name string) *receiver {
	rctx, cancel := context.WithCancel(s.ctx)
	r := &receiver{cancel: cancel, confirmed: make(chan struct{}), done: make(chan struct{})}
	var once sync.Once
	hooked := rueidis.WithOnSubscriptionHook(rctx, func(sub rueidis.PubSubSubscription) {
		if sub.Kind == "ssubscribe" && sub.Channel == name {
			once.Do(func() { close(r.confirmed) })
		}
	})
	cmd := s.h.rdb.B().Ssubscribe().Channel(name).Build()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		r.err = s.h.rdb.Receive(hooked, cmd, s.h.onMessage)
		failed := rctx.Err() == nil
		if failed && r.err == nil {
			r.err = errConnClosed // the server ended the subscription (slot moved)
		}
		close(r.done)
		if failed {
			select {
			case s.errs <- r.err:
			default:
			}
		}
	}()
	return r
}

// unsubscribe stops the receivers of names, then sends SUNSUBSCRIBE:
// rueidis stops delivering when Receive's context ends but leaves the
// server's subscription in place.
func (s *sharded) unsubscribe(ctx context.Context, names []string) error {
	s.mu.Lock()
	var stopping []*receiver
	for _, name := range names {
		if r := s.recvs[name]; r != nil {
			delete(s.recvs, name)
			r.cancel()
			stopping = append(stopping, r)
		}
	}
	s.mu.Unlock()
	for _, r := range stopping {
		<-r.done
	}
	var err error
	for _, name := range names {
		if e := s.h.rdb.Do(ctx, s.h.rdb.B().Sunsubscribe().Channel(name).Build()).Error(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

func (s *sharded) broken() <-chan error { return s.errs }

func (s *sharded) close() {
	s.cancel()
	s.wg.Wait()
}
