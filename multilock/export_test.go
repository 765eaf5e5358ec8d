package multilock

// WorkerIdle is how long a RedLock's fan-out worker waits for its next
// call before it ends (fanout.go).
var WorkerIdle = workerIdleFor
