package lockcore

import (
	"errors"
	"github.com/relock-go/relock"
	"strings"

	"github.com/redis/rueidis"
)

// How a failed call to Redis is read: whether the script may have run
// (the outcome is unknown: a lost connection, a timeout), whether it
// certainly did not (an error reply that means the server refused to run
// it), and so whether a waiting call may retry.

// notAcquired is the error of a wait that ended with cause.
func notAcquired(cause error) error {
	return Join(relock.ErrNotAcquired, cause)
}

// replyOf returns the error reply in err, if err is one.
func replyOf(err error) (*rueidis.RedisError, bool) {
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		return re, true
	}
	return nil, false
}

// IsReply reports whether err is an error reply of the server (a script's
// outcome is then known), not a lost connection or a timeout.
func IsReply(err error) bool {
	_, ok := replyOf(err)
	return ok
}

// RetryableFailure reports whether a waiting call may retry after err: a
// lost connection or a timeout (the outcome is unknown), or an error
// reply that means the script did not run (the server was loading, busy,
// read-only, out of memory, cut off from its master, or not serving the
// slot yet).
func RetryableFailure(err error) bool { return outcomeUnknown(err) || notRun(err) }

// outcomeUnknown reports whether a failed script may have run: a
// connection error or a timeout, not an error reply.
func outcomeUnknown(err error) bool {
	_, isReply := replyOf(err)
	return !isReply
}

// notRun reports whether err is an error reply that means the script did
// not run (or stopped before writing): the server was busy, loading,
// read-only or out of memory, or not serving the slot yet (on Redis 6 too,
// where a script's refused write comes back as an ERR).
func notRun(err error) bool {
	re, ok := replyOf(err)
	if !ok {
		return false
	}
	if re.IsLoading() || re.IsTryAgain() || re.IsClusterDown() || re.IsNoScript() {
		return true
	}
	switch errorCode(re) { // rueidis has no predicates for these
	case "READONLY", "BUSY", "OOM", "MASTERDOWN":
		return true
	}
	// Redis 6 runs a script that writes on a replica or out of memory,
	// and refuses its first write (before which it wrote nothing): the
	// reply is an ERR that quotes the call's error.
	switch scriptErrorCode(re.Error()) {
	case "READONLY", "OOM":
		return true
	}
	return false
}

// scriptErrorCode is the code of the error a redis.call of a script
// raised, as Redis 6 reports it: "ERR Error running script (call to
// f_<sha1>): @user_script:<line>: @user_script: <line>: -OOM command not
// allowed ..." (rueidis drops the "ERR ") gives OOM; "" for any other
// reply. (Redis 7 replies with the call's error itself.)
func scriptErrorCode(msg string) string {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(msg, "ERR "), "Error running script ")
	if !ok {
		return ""
	}
	_, call, ok := strings.Cut(rest, ": -")
	if !ok {
		return ""
	}
	code, _, _ := strings.Cut(call, " ")
	return code
}

// isBusy reports whether err is a BUSY reply: a script is running.
func isBusy(err error) bool {
	re, ok := replyOf(err)
	return ok && errorCode(re) == "BUSY"
}

// errorCode is the first word of an error reply: LOADING, READONLY, ...
func errorCode(re *rueidis.RedisError) string {
	code, _, _ := strings.Cut(re.Error(), " ")
	return code
}
