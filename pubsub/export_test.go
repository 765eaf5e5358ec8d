package pubsub

// Registered returns how many waiters and channels the hub holds, for tests
// that check nothing is left behind.
func Registered(h *Hub) (waiters, channels int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.chans {
		waiters += c.n
	}
	return waiters, len(h.chans)
}

// State describes what the hub is doing with channel ch.
func State(h *Hub, ch string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chans[ch]
	switch {
	case c == nil:
		return "none"
	case c.op == opSub:
		return "subscribing"
	case c.op == opUnsub:
		return "unsubscribing"
	case c.onServer:
		return "subscribed"
	case c.queued:
		return "queued"
	}
	return "unsubscribed"
}
