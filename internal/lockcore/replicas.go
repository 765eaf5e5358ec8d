package lockcore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/lua"
)

// DefaultReplicaTimeout is how long an operation waits for the replicas
// by default (Redisson's slavesSyncTimeout).
const DefaultReplicaTimeout = time.Second

// replicaRefresh is how old a counted number of replicas may grow before
// the next operation on that node counts them again (with INFO in the
// operation's own round trip).
const replicaRefresh = 5 * time.Second

// ReplicaMode says how a Client waits for replicas.
type ReplicaMode uint8

// The replica modes: counted (the default), a fixed number, none.
const (
	ReplicasCounted ReplicaMode = iota
	ReplicasFixed
	ReplicasOff
)

// replicaCount is what a Client knows of the replicas of one node: their
// number (from INFO replication's connected_slaves) and when it was
// counted (unix ns; 0 when it must be counted again).
type replicaCount struct {
	n       atomic.Int64
	counted atomic.Int64
}

// replicaCounts are the counts of a Client, one per slot on a cluster
// (the node that serves a slot is not known here), one in all otherwise.
type replicaCounts struct {
	mode    sync.Once
	cluster bool
	one     *replicaCount
	slots   sync.Map // uint16 -> *replicaCount
	// evaled holds the SHA1 of the scripts sent with their body once.
	evaled sync.Map
	// infos counts the INFO commands sent (for tests).
	infos atomic.Int64
}

func newReplicaCounts() *replicaCounts {
	return &replicaCounts{one: new(replicaCount)}
}

// RunAcquire runs an acquire script and waits for the replicas (see
// runSynced). It returns, beside the script's reply, an error matching
// relock.ErrReplicaSync when the replicas did not confirm in time: the
// caller then gives the acquisition back.
func (c *Core) RunAcquire(ctx context.Context, s *lua.Script, keys, args []string) (rueidis.RedisResult, error) {
	return c.runSynced(ctx, s, keys, args)
}

// RunGrant runs a rate limiter's acquire script. A grant is no lock
// operation: the default replica sync (the replicas the server counts)
// does not wait for it, as Redisson's rate limiter does not; with
// WithReplicaSync(n, timeout) it waits like RunAcquire.
func (c *Core) RunGrant(ctx context.Context, s *lua.Script, keys, args []string) (rueidis.RedisResult, error) {
	if c.replicaMode != ReplicasFixed {
		return s.Exec(ctx, c.RDB, keys, args), nil
	}
	return c.runSynced(ctx, s, keys, args)
}

// RunRelease runs a release script and waits for the replicas like
// RunAcquire. A release the replicas did not confirm is still a release
// on the master: it is not an error (a failover that loses it brings back
// a hold that nothing renews, and that ends with its lease).
func (c *Core) RunRelease(ctx context.Context, s *lua.Script, keys, args []string) rueidis.RedisResult {
	res, _ := c.runSynced(ctx, s, keys, args)
	return res
}

// noReplicaWait marks a context whose release gives back an acquisition
// that failed: it does not wait for the replicas, so that the failed
// acquisition reports within its own wait.
type noReplicaWait struct{}

// WithoutReplicaWait returns ctx marked so that RunRelease does not wait
// for replicas: for the give-back of an acquisition that failed.
func WithoutReplicaWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, noReplicaWait{}, true)
}

// runSynced runs s and, when replicas must confirm it, pipelines WAIT
// behind it in one DoMulti: rueidis sends a DoMulti on one connection
// (WAIT is a blocking command, so on a connection of its blocking pool,
// where waiting stalls no other command), and WAIT counts the
// acknowledgements of that connection's writes. Without replicas to wait
// for, the script goes alone, as it would without replica sync.
func (c *Core) runSynced(ctx context.Context, s *lua.Script, keys, args []string) (rueidis.RedisResult, error) {
	var want int64
	var count *replicaCount
	refresh := false
	if c.replicaMode == ReplicasOff || ctx.Value(noReplicaWait{}) != nil {
		return s.Exec(ctx, c.RDB, keys, args), nil
	}
	switch c.replicaMode {
	case ReplicasFixed:
		want = int64(c.replicas)
	default:
		count = c.replicaCount(ctx, keys[0])
		want = count.n.Load()
		refresh = time.Now().UnixNano()-count.counted.Load() >= int64(replicaRefresh)
	}
	if want <= 0 && !refresh {
		return s.Exec(ctx, c.RDB, keys, args), nil
	}
	if want > 0 {
		var stop func()
		ctx, stop = c.syncedContext(ctx)
		defer stop()
	}
	tail := func() []rueidis.Completed {
		var cmds []rueidis.Completed
		if want > 0 {
			cmds = append(cmds, c.RDB.B().Wait().Numreplicas(want).Timeout(c.replicaTimeout.Milliseconds()).Build())
		}
		if refresh {
			c.counts.infos.Add(1)
			cmds = append(cmds, c.RDB.B().Info().Section("replication").Build())
		}
		return cmds
	}
	eval := func() []rueidis.RedisResult {
		return c.RDB.DoMulti(ctx, append([]rueidis.Completed{
			c.RDB.B().Eval().Script(s.Body).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()}, tail()...)...)
	}
	if _, sent := c.counts.evaled.Load(s.SHA1); !sent {
		// The first time, send the body: a WAIT behind an EVALSHA that
		// the server does not know would wait for nothing.
		res := eval()
		if res[0].NonRedisError() == nil {
			c.counts.evaled.Store(s.SHA1, true)
		}
		return c.syncResult(ctx, keys[0], count, want, refresh, res)
	}
	res := c.RDB.DoMulti(ctx, append([]rueidis.Completed{
		c.RDB.B().Evalsha().Sha1(s.SHA1).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()}, tail()...)...)
	if re, ok := rueidis.IsRedisErr(res[0].Error()); ok && re.IsNoScript() {
		// The script did not run: send its body.
		res = eval()
	}
	return c.syncResult(ctx, keys[0], count, want, refresh, res)
}

// syncedContext is the context of a script sent with WAIT behind it. It
// carries ctx's values but does not end with ctx: it ends scriptGrace
// plus the replica timeout after ctx does, so that the script's reply,
// and WAIT's, are still read when the caller's context ends while they
// are in flight.
//
// The script and WAIT go on a connection of rueidis' blocking pool, not
// on the connection of the Client's other commands, and rueidis answers
// a DoMulti cut by its context with the context's error for every
// command, the script's too, and closes the connection. The script,
// written before, still runs; a give-back of it (the call's end settles
// an attempt whose reply it did not see) would go on the other connection
// and could reach the server first: it would find nothing to give back,
// and the script would then leave a hold that nobody renews until its
// lease ran out. With this context the reply is seen, and what the script
// won is given back after it, by the caller that finds its context ended
// (as every attempt checks after a reply). The cost: a call whose context
// ends while WAIT waits returns when WAIT does, at most the replica
// timeout later. Only a connection that breaks, or a server that answers
// nothing in that time, leaves the outcome unknown, as on any connection.
func (c *Core) syncedContext(ctx context.Context) (context.Context, func()) {
	if ctx.Done() == nil || ctx.Err() != nil {
		return ctx, func() {} // never ends, or ended: rueidis sends nothing
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(scriptGrace+c.replicaTimeout, cancel)
		context.AfterFunc(sctx, func() { t.Stop() })
	})
	return sctx, func() { stop(); cancel() }
}

// syncResult reads the replies of a script sent with WAIT (when want > 0)
// and INFO (when refresh) behind it.
func (c *Core) syncResult(ctx context.Context, key string, count *replicaCount, want int64, refresh bool, res []rueidis.RedisResult) (rueidis.RedisResult, error) {
	if refresh {
		c.learnReplicas(count, res[len(res)-1])
	}
	if err := res[0].Error(); want <= 0 || err != nil && !rueidis.IsRedisNil(err) {
		return res[0], nil // a script that failed wrote nothing to wait for
	}
	acked, err := res[1].AsInt64()
	if _, refused := rueidis.IsRedisErr(err); refused && count != nil {
		// The server refuses WAIT (an ACL user without it, a proxy that
		// does not know it): the default counts no replicas until the
		// next count, as on a server without any, and the operation
		// stands (WithReplicaSync's n, asked for, fails below).
		count.n.Store(0)
		count.counted.Store(time.Now().UnixNano())
		return res[0], nil
	}
	if count != nil && err == nil && acked != want {
		count.counted.Store(0) // replicas came or went: count them at the next operation
	}
	switch {
	case err != nil:
		return res[0], fmt.Errorf("%w: WAIT: %w", relock.ErrReplicaSync, err)
	case count == nil && acked < want:
		return res[0], fmt.Errorf("%w: %d of %d replicas confirmed within %v", relock.ErrReplicaSync, acked, want, c.replicaTimeout)
	case count != nil && acked == 0 && c.stillReplicated(ctx, key, count):
		return res[0], fmt.Errorf("%w: none of the %d connected replicas confirmed within %v", relock.ErrReplicaSync, want, c.replicaTimeout)
	}
	return res[0], nil
}

// replicaCount returns the count of the node that serves key, counted
// now, in a round trip of its own, when it was never counted: this
// happens once per Client (per slot on a cluster).
func (c *Core) replicaCount(ctx context.Context, key string) *replicaCount {
	rc := c.counts
	rc.mode.Do(func() { rc.cluster = c.RDB.Mode() == rueidis.ClientModeCluster })
	var count *replicaCount
	if rc.cluster {
		slot := keySlot(key)
		v, ok := rc.slots.Load(slot)
		if !ok {
			v, _ = rc.slots.LoadOrStore(slot, new(replicaCount))
		}
		count = v.(*replicaCount)
	} else {
		count = rc.one
	}
	if count.counted.Load() != 0 || count.n.Load() != 0 {
		return count
	}
	// Never counted (or counting failed): count now. INFO has no key; in
	// one DoMulti with EXISTS key it goes to the node that serves key.
	rc.infos.Add(1)
	res := c.RDB.DoMulti(ctx, c.RDB.B().Exists().Key(key).Build(), c.RDB.B().Info().Section("replication").Build())
	c.learnReplicas(count, res[1])
	return count
}

// learnReplicas stores the number of connected replicas that an INFO
// replication reply reports. A reply that is an error of Redis (INFO
// refused to the user) counts as none, counted again later; a failed
// connection leaves the count as it was, to be counted at the next
// operation.
func (c *Core) learnReplicas(count *replicaCount, res rueidis.RedisResult) {
	info, err := res.ToString()
	if err != nil {
		if _, ok := rueidis.IsRedisErr(err); ok {
			count.n.Store(0)
			count.counted.Store(time.Now().UnixNano())
		}
		return
	}
	n, ok := connectedReplicas(info)
	if !ok {
		n = 0
	}
	count.n.Store(n)
	count.counted.Store(time.Now().UnixNano())
}

// stillReplicated counts the replicas of key's node again, after none
// confirmed an operation: they may have gone (a failover to a master
// without replicas, a replica taken away), which is no failure to sync.
// It costs a round trip only on that failure path.
func (c *Core) stillReplicated(ctx context.Context, key string, count *replicaCount) bool {
	c.counts.infos.Add(1)
	res := c.RDB.DoMulti(ctx, c.RDB.B().Exists().Key(key).Build(), c.RDB.B().Info().Section("replication").Build())
	if res[1].Error() != nil {
		return true
	}
	c.learnReplicas(count, res[1])
	return count.n.Load() > 0
}

// connectedReplicas reads connected_slaves from an INFO reply.
func connectedReplicas(info string) (int64, bool) {
	const field = "connected_slaves:"
	i := strings.Index(info, field)
	if i < 0 {
		return 0, false
	}
	v := info[i+len(field):]
	if j := strings.IndexAny(v, "\r\n"); j >= 0 {
		v = v[:j]
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return n, err == nil && n >= 0
}

// ReplicaInfos is the number of INFO commands the Client sent to count
// replicas (for tests).
func (c *Core) ReplicaInfos() int64 { return c.counts.infos.Load() }

// keySlot is the Redis Cluster slot of key (CRC16-XMODEM of its hash tag,
// or of the whole key).
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
