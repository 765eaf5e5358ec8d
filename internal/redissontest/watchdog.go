package redissontest

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// unsubscribeTimeout bounds an UNSUBSCRIBE and a renewal round.
const unsubscribeTimeout = 5 * time.Second

// renewLock stands for the script of renewal.LockTask: for each lock
// hash KEYS[i] whose field ARGV[i+1] is still there, the lease ARGV[1]
// (ms) is set again. It answers one flag per key: 1 renewed, 0 gone.
var renewLock = rueidis.NewLuaScript(`
local renewed = {}
for i, hash in ipairs(KEYS) do
  local held = redis.call('hexists', hash, ARGV[i + 1]) == 1
  if held then
    redis.call('pexpire', hash, ARGV[1])
  end
  renewed[i] = held and 1 or 0
end
return renewed`)

// renewRead stands for the script of renewal.ReadLockTask, for one lock:
// KEYS[1] the hash, KEYS[2] the lease-key prefix ({name}); ARGV[1] the
// lease (ms), ARGV[2] how many reader fields follow, then the fields. Every
// level's lease key <prefix>:<field>:rwlock_timeout:<level> of every field
// still in the hash gets the lease again, and the hash too when any field
// was there. It answers {1} when one was, {0} otherwise.
var renewRead = rueidis.NewLuaScript(`
local alive = false
local n = tonumber(ARGV[2])
for k = 1, n do
  local field = ARGV[2 + k]
  local levels = tonumber(redis.call('hget', KEYS[1], field))
  if levels then
    alive = true
    for level = levels, 1, -1 do
      redis.call('pexpire', KEYS[2] .. ':' .. field .. ':rwlock_timeout:' .. level, ARGV[1])
    end
  end
end
if alive then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1}
end
return {0}`)

// renewal is what the watchdog renews for one lock name: the hold counts
// of its threads (renewal.LockEntry), in the order they came; a read
// lock's renewal also knows its lease-key prefix.
type renewal struct {
	name      string
	read      bool
	keyPrefix string
	order     []int64
	counts    map[int64]int
	fields    map[int64]string
}

// renewals is the Client's watchdog: one timer for every lock it renews,
// firing every third of the watchdog timeout (RenewalTask.schedule).
type renewals struct {
	mu      sync.Mutex
	holds   map[string]*renewal // by lock name (read locks by "read:" + name)
	running bool
}

func renewalKey(name string, read bool) string {
	if read {
		return "read:" + name
	}
	return "lock:" + name
}

// schedule adds a hold of thread tid (hash field field) of the lock name
// to the watchdog (scheduleExpirationRenewal).
func (c *Client) schedule(name string, read bool, keyPrefix string, tid int64, field string) {
	r := &c.renewals
	r.mu.Lock()
	defer r.mu.Unlock()
	key := renewalKey(name, read)
	h := r.holds[key]
	if h == nil {
		h = &renewal{name: name, read: read, keyPrefix: keyPrefix, counts: map[int64]int{}, fields: map[int64]string{}}
		r.holds[key] = h
	}
	if h.counts[tid] == 0 {
		h.order = append(h.order, tid)
		h.fields[tid] = field
	}
	h.counts[tid]++
	if !r.running && c.ctx.Err() == nil {
		r.running = true
		c.wg.Add(1)
		go c.watchdogLoop()
	}
}

// cancelRenewal takes one hold of tid off the watchdog (all of them for
// tid < 0, as forceUnlock does) (cancelExpirationRenewal).
func (c *Client) cancelRenewal(name string, read bool, tid int64) {
	r := &c.renewals
	r.mu.Lock()
	defer r.mu.Unlock()
	key := renewalKey(name, read)
	h := r.holds[key]
	if h == nil {
		return
	}
	if tid < 0 {
		delete(r.holds, key)
		return
	}
	if h.counts[tid] == 0 {
		return
	}
	h.counts[tid]--
	if h.counts[tid] == 0 {
		delete(h.counts, tid)
		delete(h.fields, tid)
		for i, t := range h.order {
			if t == tid {
				h.order = append(h.order[:i], h.order[i+1:]...)
				break
			}
		}
		if len(h.order) == 0 {
			delete(r.holds, key)
		}
	}
}

// watchdogLoop renews every watched lock every third of the watchdog
// timeout until the Client closes.
func (c *Client) watchdogLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.watchdog / 3)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.renewAll()
	}
}

// renewAll runs one round: a plain lock renews the field of its first
// thread (LockTask), a read lock the fields of all its threads
// (ReadLockTask). A lock whose hold is gone leaves the watchdog.
func (c *Client) renewAll() {
	r := &c.renewals
	r.mu.Lock()
	var todo []renewal
	for _, h := range r.holds {
		cp := *h
		cp.order = append([]int64(nil), h.order...)
		cp.fields = make(map[int64]string, len(h.fields))
		for k, v := range h.fields {
			cp.fields[k] = v
		}
		todo = append(todo, cp)
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, unsubscribeTimeout)
	defer cancel()
	lease := ms(c.watchdog)
	for _, h := range todo {
		var gone bool
		if h.read {
			args := []string{lease, itoa(int64(len(h.order)))}
			for _, tid := range h.order {
				args = append(args, h.fields[tid])
			}
			flags, err := c.eval(ctx, renewRead, []string{h.name, h.keyPrefix}, args...).AsIntSlice()
			gone = err == nil && len(flags) == 1 && flags[0] == 0
		} else {
			first := h.order[0]
			flags, err := c.eval(ctx, renewLock, []string{h.name}, lease, h.fields[first]).AsIntSlice()
			gone = err == nil && len(flags) == 1 && flags[0] == 0
		}
		if gone {
			r.mu.Lock()
			delete(r.holds, renewalKey(h.name, h.read))
			r.mu.Unlock()
		}
	}
}
