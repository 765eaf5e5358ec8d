package watchdog

// Wakeups returns how many times the wheel goroutine of w has woken up.
func Wakeups(w *Watchdog) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wakeups
}
