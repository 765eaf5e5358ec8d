// Command relock uses the distributed locks of
// github.com/relock-go/relock from the shell: it runs a command under a
// lock (a distributed flock), shows who holds a lock, forces one open, and
// demonstrates the locks with worker processes that contend for one.
// Locks use Redisson's layout in Redis, so relock sees and excludes Java
// and Go holders alike.
//
// Usage:
//
//	relock run [--redis ADDR] [--wait DUR] [--fair] [--watchdog LEASE] [--grace DUR] NAME [--] COMMAND [ARG...]
//	relock status [--redis ADDR] [--json] NAME
//	relock unlock --force [--redis ADDR] NAME
//	relock demo [--redis ADDR] [--workers N] [--duration DUR] [--fair] [--plain]
//	relock COMMAND --help
//
// Every command takes --redis ADDR (host:port); it defaults to
// $RELOCK_REDIS, then 127.0.0.1:6379. Durations are Go durations ("1.5s",
// "200ms") or plain seconds ("5"). Flags may come before or after NAME.
//
// # run
//
// run waits for the lock NAME (for as long as it takes, or up to --wait;
// --wait 0 tries once), then runs COMMAND with relock's stdin, stdout and
// stderr. It holds the lock on the watchdog lease (--watchdog, 30s by
// default, renewed every third of it) while COMMAND runs, releases it as
// soon as COMMAND ends, and exits with COMMAND's exit code, or 128+N when
// COMMAND was killed by signal N, as a shell does. The lock's hash field is
// "<clientID>:run:<host>:<pid>". --fair takes a fair (FIFO) lock instead.
//
// SIGINT, SIGTERM and SIGHUP sent to relock are passed on to COMMAND;
// relock then waits for COMMAND to end and releases the lock at once. A
// signal that comes while relock still waits for the lock ends the wait:
// COMMAND does not run and relock exits 128+N. On Linux COMMAND gets
// SIGTERM if relock itself dies, even by SIGKILL (the lock then frees when
// its lease runs out), so COMMAND never goes on running without the lock.
//
// If the lock is lost while COMMAND runs (no renewal succeeded for a whole
// lease, or 'relock unlock --force' deleted it), relock says so on stderr,
// sends COMMAND SIGTERM, then SIGKILL after --grace (10s by default), and
// exits 70. Signals go to COMMAND's process only, not to processes it
// started.
//
// # status
//
// status reads the lock NAME in one MULTI/EXEC and prints its holders
// (hash field and hold count), its remaining lease, a fair lock's queue
// (position, field, and the deadline by which each waiter must refresh
// its place, as time left on the server's clock) and the fencing counter.
// --json prints one object with stable field names: name, locked,
// lease_remaining_ms, holders[] {field, client_id, owner, hold_count},
// queue[] {position, field, client_id, owner, deadline_ms, remaining_ms},
// fencing_counter, server_time_ms, keys {lock, queue, timeout, token,
// channel}.
//
// # unlock
//
// unlock --force deletes the lock NAME whoever holds it and wakes a waiter
// (a fair lock's head waiter). Without --force it refuses and exits 64.
// It prints whether there was a hold, and whose. It refuses to delete a
// key that is not a lock.
//
// # demo
//
// demo uses the Redis at --redis if it answers PING within half a second,
// else starts a throwaway redis-server (which must be installed:
// apt-get install -y redis-server, or run ./demo.sh, which installs it).
// It starts --workers processes (4; the relock binary re-run with the
// hidden subcommand demo-worker) that loop for --duration (15s): Lock,
// work 5-30ms, Unlock. Each one increments a shared counter on entering
// and decrements it on leaving, and reports every step to the demo as JSON
// lines on its stdout. On a terminal the demo redraws a small table every
// 100ms (each worker's state, the holder and queue as Redis has them, the
// latest hand-offs and their latency); otherwise, or with --plain, it
// prints a line a second. It ends with a summary: acquisitions per
// worker, hand-off latency p50/p99/max, and violations, the number of
// times two workers were inside at once (by the counter, and by
// overlapping hold intervals), which must be 0. Then it stops the workers,
// deletes its keys and stops its own redis-server. --fair uses a fair lock.
//
// # Exit codes
//
//	0      success (run: COMMAND exited 0)
//	1      other failure (status, unlock: the key is not a lock;
//	       demo: a violation, or a worker failed)
//	64     bad command line (EX_USAGE), and unlock without --force
//	69     Redis could not be reached or answered with an error
//	       (EX_UNAVAILABLE); run: before COMMAND ran (a failed release
//	       afterwards is a warning); demo: no Redis, and none could be
//	       started
//	70     run: the lock was lost while COMMAND ran; COMMAND was stopped
//	75     run: --wait ended without the lock (EX_TEMPFAIL)
//	126    run: COMMAND could not be started
//	127    run: COMMAND was not found
//	128+N  run: COMMAND was killed by signal N, or relock got signal N
//	       while waiting for the lock; demo: interrupted
//
// run otherwise exits with COMMAND's exit code.
package main
