package main

// workerEvent is one line a demo worker writes on its stdout (JSON), and
// what the demo reads back. Times are wall-clock unix nanoseconds: the
// workers and the demo run on one machine.
type workerEvent struct {
	// Kind is one of:
	//   ready     the worker is connected (ClientID, PID)
	//   waiting   it calls Lock
	//   acquired  Lock returned (Inside, Prev, HandoffNs, WaitNs, N)
	//   released  it is about to call Unlock (HeldNs)
	//   error     something failed (Msg); the worker exits 1
	//   done      it stopped as asked (N)
	// The demo itself adds "log" for a line on a worker's stderr and
	// "exit" when a worker's stdout closes.
	Kind     string `json:"ev"`
	Worker   string `json:"worker"`
	T        int64  `json:"t"`
	PID      int    `json:"pid,omitempty"`
	ClientID string `json:"client_id,omitempty"`
	// N counts the worker's acquisitions so far.
	N int `json:"n,omitempty"`
	// Inside is the shared "inside" counter right after the worker
	// incremented it on entering: 1 unless another worker is inside too.
	Inside int64 `json:"inside,omitempty"`
	// Prev is the worker that released the lock before this acquisition,
	// and HandoffNs the time from that release to this acquisition.
	Prev      string `json:"prev,omitempty"`
	HandoffNs int64  `json:"handoff_ns,omitempty"`
	// WaitNs is how long Lock waited.
	WaitNs int64 `json:"wait_ns,omitempty"`
	// HeldNs is how long the worker held the lock.
	HeldNs int64  `json:"held_ns,omitempty"`
	Msg    string `json:"msg,omitempty"`
}
