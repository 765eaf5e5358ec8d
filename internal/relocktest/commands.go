package relocktest

import (
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// Knows reports whether the server of rdb has the command (COMMAND INFO
// finds it), so that a test checks what applies to the server it runs on:
// EVALSHA_RO and SSUBSCRIBE, for one, came with Redis 7.
func Knows(t testing.TB, rdb rueidis.Client, command string) bool {
	t.Helper()
	info, err := rdb.Do(t.Context(), rdb.B().CommandInfo().CommandName(command).Build()).ToArray()
	require.NoError(t, err, "COMMAND INFO %s", command)
	require.Len(t, info, 1, "COMMAND INFO %s", command)
	return !info[0].IsNil()
}
