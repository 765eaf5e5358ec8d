package integration_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRaceReportFilter: the reports of rueidis's recycled command (a test
// process's stderr as CI saw it) are recognized; a report whose current
// access is relock's, or whose previous access is not rueidis's writer,
// is not.
func TestRaceReportFilter(t *testing.T) {
	b, err := os.ReadFile("testdata/race_recycled.txt")
	require.NoError(t, err)
	stderr := string(b)
	reports, recycled := unexplainedRaces(stderr)
	assert.Empty(t, reports, "reports of rueidis's recycled command taken as unexplained")
	assert.Equal(t, 5, recycled, "recycled-command reports found")

	// The same report with relock's code as the current access.
	ours := strings.Replace(stderr, "github.com/redis/rueidis/internal/cmds.Builder.Evalsha()",
		"github.com/relock-go/relock/internal/lockcore.(*hold).grant()", 1)
	reports, recycled = unexplainedRaces(ours)
	assert.Len(t, reports, 1, "a race in relock's code")
	assert.Equal(t, 4, recycled)

	// The same report with another previous access.
	other := strings.Replace(stderr, "github.com/redis/rueidis.writeCmd()",
		"github.com/relock-go/relock/internal/lockcore.(*Core).renew()", 1)
	reports, _ = unexplainedRaces(other)
	assert.Len(t, reports, 1, "a race with another previous access")

	reports, recycled = unexplainedRaces("no race here\n")
	assert.Empty(t, reports)
	assert.Zero(t, recycled)
}
