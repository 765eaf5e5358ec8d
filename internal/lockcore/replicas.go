package lockcore

import (
	"context"
	"fmt"
	"github.com/relock-go/relock"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/lua"
)

// RunAcquire runs an acquire script. With replica sync on, it pipelines
// the script with WAIT on one connection (WAIT counts the acknowledgements
// of that connection's writes) and returns, beside the script's reply, an
// error matching relock.ErrReplicaSync when fewer replicas confirmed in time.
func (c *Core) RunAcquire(ctx context.Context, s *lua.Script, keys, args []string) (rueidis.RedisResult, error) {
	if c.replicas == 0 {
		return s.Exec(ctx, c.RDB, keys, args), nil
	}
	wait := func() rueidis.Completed {
		return c.RDB.B().Wait().Numreplicas(int64(c.replicas)).Timeout(c.replicaTimeout.Milliseconds()).Build()
	}
	res := c.RDB.DoMulti(ctx,
		c.RDB.B().Evalsha().Sha1(s.SHA1).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build(), wait())
	if re, ok := rueidis.IsRedisErr(res[0].Error()); ok && re.IsNoScript() {
		// The script did not run: send its body.
		res = c.RDB.DoMulti(ctx,
			c.RDB.B().Eval().Script(s.Body).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build(), wait())
	}
	acked, err := res[1].AsInt64()
	switch {
	case err != nil:
		return res[0], fmt.Errorf("%w: WAIT: %w", relock.ErrReplicaSync, err)
	case acked < int64(c.replicas):
		return res[0], fmt.Errorf("%w: %d of %d replicas confirmed within %v", relock.ErrReplicaSync, acked, c.replicas, c.replicaTimeout)
	}
	return res[0], nil
}
