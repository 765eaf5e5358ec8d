package relocktest

import (
	"testing"

	"github.com/redis/rueidis"
)

// Knows reports whether the server of rdb has the command (COMMAND INFO
// finds it), so that a test checks what applies to the server it runs on:
// EVALSHA_RO and SSUBSCRIBE, for one, came with Redis 7.
func Knows(t testing.TB, rdb rueidis.Client, command string) bool {
	t.Helper()
	info, err := rdb.Do(t.Context(), rdb.B().CommandInfo().CommandName(command).Build()).ToArray()
	if err != nil || len(info) != 1 {
		t.Fatalf("COMMAND INFO %s: %v, %d entries", command, err, len(info))
	}
	return !info[0].IsNil()
}
