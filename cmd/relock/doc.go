// Command relock uses the distributed locks of
// github.com/relock-go/relock from the shell: it runs a command under a
// lock (a distributed flock), shows who holds a lock and who waits for
// it, forces one open, shows who waits for whom and flags deadlocks,
// shows the busiest locks live, and demonstrates the locks with worker
// processes that contend for one.
// Locks use Redisson's layout in Redis, so relock sees and excludes Java
// and Go holders alike.
//
// Usage:
//
//	relock [CONNECTION FLAGS] run [-n|--no-wait] [--wait DUR] [--fair] [--fenced] [--watchdog LEASE] [--grace DUR] NAME [--] COMMAND [ARG...]
//	relock [CONNECTION FLAGS] status [--json] [--no-waiters] [--kind KIND] NAME
//	relock [CONNECTION FLAGS] unlock --force NAME
//	relock [CONNECTION FLAGS] scan [--match PATTERN] [--json]
//	relock [CONNECTION FLAGS] waits [--match PATTERN] [--json]
//	relock [CONNECTION FLAGS] top [--match PATTERN] [--once] [--interval DUR] [--limit N]
//	relock [CONNECTION FLAGS] demo [--workers N] [--duration DUR] [--fair] [--plain]
//	relock --version | relock version
//	relock COMMAND --help
//
// Durations are Go durations ("1.5s", "200ms") or plain seconds ("5").
// Flags may come before or after NAME.
//
// # Connecting
//
// Every command connects the same way, through the connection flags, which
// may come before the command's name or after it:
//
//	--redis ADDR|URL  where Redis is; default $RELOCK_REDIS, then 127.0.0.1:6379
//	--user NAME       ACL user
//	--tls             TLS (implied by rediss:// and by the flags below)
//	--cacert FILE     CA certificates (PEM) to verify the server with
//	--cert FILE       client certificate (PEM), with --key FILE
//	--sni NAME        the server's name for SNI and verification
//	--insecure        no verification of the server's certificate
//
// --redis takes host[:port] (the port defaults to 6379; an IPv6 address
// goes in brackets, [::1]:6380), a comma-separated list of seed addresses
// of a Redis Cluster (relock, through rueidis, finds out from the server
// whether it is a cluster), or a URL as rueidis.ParseURL reads it:
// redis://[USER[:PASSWORD]@]HOST[:PORT][/DB], rediss:// for TLS, or
// unix:///path/to/redis.sock[?db=N]; the query parameter addr=HOST:PORT
// (repeated) adds seed addresses, and master_set=NAME makes them the
// addresses of Sentinels that know the master NAME (with TLS, the
// sentinels are reached with the same TLS settings; they are sent no
// password).
//
// The password is the URL's; else $RELOCK_PASSWORD; else $REDISCLI_AUTH
// (redis-cli's variable). There is no password flag: a command line is
// visible to every user of the machine, and so is a URL with a password in
// it, so prefer the variables. relock never prints a password: messages
// show a URL with the password masked.
//
// A server that cannot be reached, refuses the password, or fails the TLS
// handshake makes relock exit 69 with one line that names the server (and,
// when it is clear, what to change).
//
// # run
//
// run waits for the lock NAME (for as long as it takes, or up to --wait;
// --wait 0, or -n / --no-wait, tries once), then runs COMMAND with relock's
// stdin, stdout and stderr. It holds the lock on the watchdog lease while
// COMMAND runs, releases it as soon as COMMAND ends, and exits with
// COMMAND's exit code, or 128+N when COMMAND was killed by signal N, as a
// shell does. --fair takes a fair (FIFO) lock; --fenced a fenced lock
// (the two do not combine: the fair lock hands out no tokens).
//
// COMMAND's environment gets RELOCK_NAME (the lock's name), RELOCK_OWNER
// (the lock's hash field, "<clientID>:run:<host>:<pid>") and, with
// --fenced, RELOCK_TOKEN (the hold's fencing token, greater than every
// token handed out before for NAME).
//
// The lease (--watchdog, 2.4s) is renewed every third of it (800ms), and
// every renewal checks the hold: a lock that expires, is deleted or is
// force-unlocked while COMMAND runs is noticed in under a second. A relock
// that dies (or stays stopped) leaves the lock to expire after the lease.
//
// COMMAND runs in a process group of its own. Every signal relock gets
// (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH,
// SIGTSTP, SIGCONT) goes on to that group, so that a signal sent to relock,
// or to relock's process group, reaches COMMAND once. When stdin is
// relock's controlling terminal and relock runs in the foreground,
// COMMAND's group is made the terminal's foreground group: COMMAND can read
// the terminal and gets Ctrl-C from it (once), and relock takes the
// terminal back when COMMAND ends. When COMMAND stops (Ctrl-Z), relock
// stops too if it has a controlling terminal, so that the shell gets the
// terminal back; when relock is continued (fg), it gives the terminal back
// to COMMAND and continues it. A stopped relock renews nothing: a stop
// longer than the lease loses the lock. (Without a controlling terminal,
// relock keeps running, and holding the lock, while COMMAND is stopped.)
// A signal that comes while relock still waits for the lock ends the
// wait: COMMAND does not run and relock exits 128+N. On Linux COMMAND gets
// SIGTERM if relock itself dies, even by SIGKILL.
//
// If the lock is lost while COMMAND runs, relock says so on stderr, sends
// COMMAND's group SIGTERM, then SIGKILL after --grace (10s by default),
// and exits 70. If the hold is found gone only when relock releases it
// after COMMAND ended, relock says when and exits 70 too.
//
// # status
//
// status reads everything Redis holds under NAME in one MULTI/EXEC and
// tells from the keys what NAME is (or takes --kind's word for it): a
// lock, fenced lock or fair lock, a read-write lock, a semaphore, a
// counting semaphore, a rate limiter or a count-down latch. It prints only the sections NAME's kind has: for a
// lock, its holders (hash field and hold count) and remaining lease; for
// a fair lock also its queue (position, field, and the deadline by which
// each waiter must refresh its place, as time left on the server's
// clock); for a fenced lock also its fencing counter. A fair lock is told
// by its queue and a fenced lock by its counter, so a fair lock nobody
// waits for shows as a lock. --json prints one object with stable field
// names; for a lock: name, kind, locked, lease_remaining_ms, holders[]
// {field, client_id, owner, hold_count}, queue[] {position, field,
// client_id, owner, deadline_ms, remaining_ms}, fencing_counter,
// server_time_ms, keys {lock, queue, timeout, token, channel}
// ('relock status --help' lists the other kinds' fields).
//
// Every kind also shows its waiters, from the wait records relock Clients
// keep while they wait (see waits): owner field, what each waits for and
// for how long, longest first; --json adds waiters[] {field, client_id,
// owner, kind, since_ms, waiting_ms}. Finding the records takes a SCAN of
// every master; --no-waiters skips it. Redisson's waiters record nothing.
//
// When no key of any kind is under NAME, status prints "no such lock" on
// stderr and exits 4. A free lock that is neither fenced nor fair keeps
// no key, and neither does an open latch: those look the same.
//
// # unlock
//
// unlock --force deletes the lock NAME whoever holds it and wakes a waiter
// (a fair lock's head waiter). Without --force it refuses and exits 64.
// It prints whether there was a hold, and whose. It refuses to delete a
// key that is not a lock.
//
// # scan
//
// scan walks the keyspace with SCAN (never KEYS; on a Redis Cluster, on
// every master) and lists every lock relock or Redisson keeps there:
// reentrant and fenced locks, fair locks with their queues, read-write
// locks, permit-expirable and counting semaphores, rate limiters and
// count-down latches, each with
// its kind, holders, hold counts and TTL. Keys of other layouts are
// ignored. It flags leaks, the states nothing will clean up: a lock hash
// without a TTL (a crashed holder keeps it forever), a fair-lock waiter
// past its deadline on the server's clock (or without one), an unlock
// latch, a read-hold timeout key or a counting semaphore's grants without
// a TTL; and it exits 1 when it
// flags anything. --match PATTERN selects lock names (Redis' glob syntax),
// with all their keys. A fair lock nobody waits for looks like a
// reentrant lock, and a count-down latch (or a semaphore with no permit
// out, or a counting semaphore) like any integer key: scan finds those
// only while someone waits on them (a counting semaphore also for 10s
// after a relock acquisition, by its grants). keys[] lists every key of a lock, relock's own (a lock's wake-one
// registry, a semaphore's queue) with Redisson's. --json prints one
// object per line with the stable fields name, kind, ttl_ms (-1: none),
// holders[] {field, client_id, owner, hold_count, role, lease_ms},
// leaked, leaks[], keys[], node, and, by kind, mode, queue[],
// fencing_counter, permits_available, count.
//
// # waits
//
// waits shows who waits for what. A relock Client records each call that
// waits (for a lock of any kind, a read or write lock, a semaphore, a
// counting semaphore, a rate limiter or a latch) in a hash of its own,
// relock_waits:{<clientID>} after its key prefix, while it waits; the
// hash expires with the Client's watchdog lease when the Client dies.
// waits finds those hashes with SCAN on every master and reads what is
// held under each name waited for, one name at a time. For each name it
// prints what the name is, its holders (field and hold count, read or
// write for a read-write lock), what is left of a semaphore, rate limiter
// or latch, and its waiters: field, what each waits for and for how long
// on the server's clock, longest first.
//
// It flags cycles, owners that wait for one another in a ring (A holds X
// and waits for Y, held by B, which waits for X; any length, across
// Clients and kinds; an owner that holds a read lock and waits for the
// write lock of the same name is a cycle of one), each confirmed by a
// second reading of the graph, and exits 3 when it finds one. Waiters of
// semaphores, counting semaphores, rate limiters and latches are shown
// but are in no cycle: those name no owner that holds them. --match
// PATTERN selects the names shown (cycles are found in the whole graph).
// --json prints one object per line: per name, type "name", name, kind,
// mode, holders[] {field, client_id, owner, hold_count, mode}, available,
// count, waiters[] {field, client_id, owner, kind, since_ms, waiting_ms},
// longest_wait_ms, in_cycle, error; per cycle, type "cycle", owners[],
// edges[] {waiter, name, kind, holder}.
//
// # top
//
// top is a live view of the busiest locks under --match PATTERN: every
// --interval (1s) a line per name waited for or released in the last
// interval (at most --limit, 20), most waiters first: kind, first holder,
// waiters, longest wait, acquisitions and hand-offs per second. The rates
// come from the release channels (PSUBSCRIBE to the locks' and read-write
// locks' channels) and from the holders seen at each refresh (a fenced
// lock's counter, a rate limiter's grants); they are approximate, as
// 'relock top --help' says. On a terminal the view is redrawn in place
// until q or Ctrl-C; on another stdout a frame is printed per interval.
// --once prints one frame, after one interval, and exits. top writes
// nothing to Redis and never changes the server's configuration.
//
// # demo
//
// demo uses the Redis the connection flags name if it answers within half
// a second; if nothing answers there at all, it starts a throwaway
// redis-server (which must be installed:
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
// # version
//
// version (or --version) prints the module version ("(devel)" for a
// build from a source tree without one), the module path, and the Go
// version and platform relock was built with.
//
// # Exit codes
//
//	0      success (run: COMMAND exited 0)
//	1      other failure (status, unlock: the key is not a lock, or not
//	       the --kind asked for; scan: a leak was flagged; demo: a
//	       violation, or a worker failed)
//	3      waits: a cycle of waiting owners (a deadlock) was found
//	4      status: no such lock, nothing at all under NAME
//	64     bad command line (EX_USAGE), including a bad address or URL and
//	       an unreadable certificate file; unlock without --force
//	69     Redis could not be reached, refused the password or the user,
//	       failed the TLS handshake, or answered with an error
//	       (EX_UNAVAILABLE); run: before COMMAND ran (a failed release
//	       afterwards is a warning); demo: a server answered but refused
//	       the connection, or none answered and none could be started
//	70     run: the lock was lost while COMMAND ran (COMMAND was stopped),
//	       or was found gone at release
//	75     run: --wait (or -n) ended without the lock (EX_TEMPFAIL)
//	126    run: COMMAND could not be started
//	127    run: COMMAND was not found
//	128+N  run: COMMAND was killed by signal N, or relock got signal N
//	       while waiting for the lock; demo: interrupted
//
// run otherwise exits with COMMAND's exit code.
package main
