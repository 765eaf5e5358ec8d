package main

import (
	"fmt"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/multilock"
	"github.com/relock-go/relock/rlock"
)

// redlockImpl is a relock RedLock over one Client per server.
type redlockImpl struct{ clients []*rlock.Client }

func openRedLock(addrs []string, w *wire) (impl, error) {
	var im redlockImpl
	for _, a := range addrs {
		c, err := rlock.NewClient(w.rueidisOption(a))
		if err != nil {
			im.close()
			return nil, err
		}
		im.clients = append(im.clients, c)
	}
	return im, nil
}

func (im redlockImpl) locker(name string) locker {
	locks := make([]multilock.Locker, len(im.clients))
	for i, c := range im.clients {
		locks[i] = c.GetLock(name)
	}
	return multilock.NewRedLock(locks...)
}

func (im redlockImpl) close() {
	for _, c := range im.clients {
		_ = c.Close()
	}
}

// redsyncMultiImpl is redsync over one go-redis pool per server.
type redsyncMultiImpl struct {
	rdbs []*goredis.Client
	rs   *redsync.Redsync
}

func openRedsyncMulti(addrs []string, w *wire) (impl, error) {
	var im redsyncMultiImpl
	var pools []redsyncredis.Pool
	for _, a := range addrs {
		rdb := goredis.NewClient(w.goredisOptions(a))
		im.rdbs = append(im.rdbs, rdb)
		pools = append(pools, redsyncgoredis.NewPool(rdb))
	}
	im.rs = redsync.New(pools...)
	return im, nil
}

func (im redsyncMultiImpl) locker(name string) locker {
	return redsyncLocker{im.rs.NewMutex(name, redsync.WithTries(redsyncTries))}
}

func (im redsyncMultiImpl) close() {
	for _, rdb := range im.rdbs {
		_ = rdb.Close()
	}
}

// redlockPeers are the rows of the RedLock scenario: a single lock on the
// first server, relock's RedLock over all of them, and (when redsync is
// selected) redsync over all of them.
func (r *run) redlockPeers(addrs []string) []peer {
	n := len(addrs)
	ps := []peer{
		{name: "relock single lock", exclusive: true, open: openRelock},
		{name: fmt.Sprintf("relock RedLock x%d", n), exclusive: true, multi: true,
			open: func(_ string, w *wire) (impl, error) { return openRedLock(addrs, w) }},
	}
	for _, p := range r.peers {
		if p.name == "redsync" {
			ps = append(ps,
				peer{name: "redsync single", exclusive: true, open: openRedsync},
				peer{name: fmt.Sprintf("redsync x%d", n), exclusive: true, multi: true,
					open: func(_ string, w *wire) (impl, error) { return openRedsyncMulti(addrs, w) }})
		}
	}
	return ps
}
