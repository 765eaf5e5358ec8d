package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/relock-go/relock/rlock"
)

const unlockUsage = `Usage: relock [CONNECTION FLAGS] unlock --force NAME

Delete the lock NAME whoever holds it, and wake a waiter (for a fair lock,
the head of its queue). It is meant for a lock whose holder is gone or
stuck. The holder is not asked: if it still runs, it learns of the loss at
its next renewal (within a third of its lease; 'relock run' then stops its
command) and until then may act as if it held the lock. Hence --force.

It prints whether there was a hold, and whose.

Exit codes: 0 whether or not there was a hold, 1 the key is not a lock,
64 without --force or bad command line, 69 Redis could not be reached (or
refused the password, or TLS failed).`

func (cl *cli) unlock(args []string) int {
	fs := cl.newConnFlagSet("unlock", unlockUsage)
	force := fs.Bool("force", false, "really delete the lock, whoever holds it")
	pos, _, code := cl.parse(fs, args, -1)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return cl.usageError(fs, "unlock needs exactly one lock NAME (got %d arguments)", len(pos))
	}
	name := pos[0]
	key, err := cl.conn.lockName(name)
	if err != nil {
		return cl.usageError(fs, "%v", err)
	}
	if !*force {
		return cl.errorf(exitUsage, "unlock deletes lock %q whoever holds it, without asking the holder; "+
			"add --force to do that (see 'relock status %s' for who holds it)", name, name)
	}

	rdb, _, code := cl.connect()
	if code >= 0 {
		return code
	}
	defer rdb.Close()
	client, err := rlock.New(rdb, rlock.WithKeyPrefix(cl.conn.prefix))
	if err != nil {
		return cl.errorf(exitFailure, "%v", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Read first: to say whose hold goes, to pick the kind (a fair lock's
	// force-unlock wakes its head waiter), and never to delete a key that
	// is not a lock.
	st, err := readLock(ctx, rdb, key)
	if err != nil {
		if errors.Is(err, errNotALock) {
			return cl.errorf(exitFailure, "%v; not deleting it", err)
		}
		return cl.errorf(exitUnavailable, "%v", err)
	}
	force1 := client.GetLock(name).ForceUnlock
	if len(st.Queue) > 0 {
		force1 = client.GetFairLock(name).ForceUnlock
	}
	held, err := force1(ctx)
	if err != nil {
		return cl.errorf(exitUnavailable, "force unlock %q: %v", name, err)
	}
	if !held {
		fmt.Fprintf(cl.stdout, "lock %q was not held; nothing to do\n", name)
		return exitOK
	}
	var holders []string
	for _, h := range st.Holders {
		holders = append(holders, fmt.Sprintf("%s (hold count %d)", h.Field, h.HoldCount))
	}
	if len(holders) == 0 {
		holders = []string{"an owner that took it just now"}
	}
	fmt.Fprintf(cl.stdout, "lock %q was held by %s; force-unlocked it\n", name, strings.Join(holders, ", "))
	if len(st.Queue) > 0 {
		fmt.Fprintf(cl.stdout, "woke the head of its fair queue: %s\n", st.Queue[0].Field)
	}
	return exitOK
}
