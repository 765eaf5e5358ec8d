package lockcore

import (
	"context"
	"fmt"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"time"
)

// Mutex is the generic reentrant lock behind every lock kind. A handle is
// cheap: it does no I/O until a method is called, and holds no state of its
// own (a hold belongs to its owner and the Client, not to a handle).
type Mutex struct {
	core *Core
	name string
	kind Kind
	// anonKey keys the Client's anonymous holds of the lock: the name, plus
	// a role for kinds with several locks on one name.
	anonKey string
	// suffix ends the owners' hash fields (a role's FieldSuffix).
	suffix string
	// shared is set for a role that several owners hold at once.
	shared  bool
	channel string // layout.Channel(name)
	wakers  string // layout.Wakers(name) with wake-one on, else "" (unused)
	nameErr error  // CheckName(name), checked once
}

// NewMutex returns a handle on the lock name of kind k.
func NewMutex(c *Core, name string, k Kind) *Mutex {
	return &Mutex{core: c, name: name, kind: k, anonKey: name, channel: layout.Channel(name),
		wakers: c.wakersKey(name), nameErr: CheckName(name)}
}

// wakersKey is the wake registry of the lock name with wake-one on, and
// "" without: only wake-one reads it (see wake.go), and a handle then
// keeps no string for it.
func (c *Core) wakersKey(name string) string {
	if !c.wakeOne {
		return ""
	}
	return layout.Wakers(name)
}

// Role is one of several locks kept under one name (a read-write lock's
// read and write sides).
type Role struct {
	// Name keeps the role's anonymous holds apart from the other roles'.
	Name string
	// FieldSuffix ends the hash field of each owner's hold:
	// "<clientID>:<owner>" + FieldSuffix (Redisson's write lock: ":write").
	FieldSuffix string
	// Shared is set for a role that several owners may hold at once (a
	// read lock): a Client then keeps all its anonymous holds of it, and
	// an ownerless Unlock releases the latest one still held (as
	// sync.RWMutex.RUnlock releases one read lock). An exclusive role
	// keeps only the latest.
	Shared bool
}

// NewMutexRole is NewMutex for one of several locks kept under one name:
// each role has its own anonymous holds and its own hash fields.
func NewMutexRole(c *Core, name string, role Role, k Kind) *Mutex {
	return &Mutex{core: c, name: name, kind: k, anonKey: name + "\x00" + role.Name, suffix: role.FieldSuffix,
		shared: role.Shared, channel: layout.Channel(name), wakers: c.wakersKey(name), nameErr: CheckName(name)}
}

// Field is the hash field of owner's hold of the lock.
func (m *Mutex) Field(owner string) string { return layout.Field(m.core.ID, owner) + m.suffix }

// Name is the lock's name in Redis (with the Client's key prefix): the
// name its keys and channels are derived from.
func (m *Mutex) Name() string { return m.name }

// GivenName is the name the lock was asked for: Name without the
// Client's key prefix.
func (m *Mutex) GivenName() string { return m.core.Unmap(m.name) }

// Core is the Client state the handle belongs to.
func (m *Mutex) Core() *Core { return m.core }

func (m *Mutex) check() error {
	if err := m.core.CheckOpen(); err != nil {
		return err
	}
	return m.nameErr
}

// holder returns the owner that Unlock and the queries act for: the one in
// ctx, else the owner of the Client's latest anonymous hold of the lock
// ("" when there is none), which anon reports.
func (m *Mutex) holder(ctx context.Context) (owner string, anon bool, err error) {
	owner, ok, err := m.contextOwner(ctx)
	if err != nil || ok {
		return owner, false, err
	}
	return m.core.anonOwner(m.anonKey), true, nil
}

// OwnerChecker is implemented by a Kind that refuses some owners (a
// read-write lock: an owner whose read field would be another owner's
// write field); its calls fail with relock.ErrInvalidArgument for them.
type OwnerChecker interface {
	CheckOwner(owner string) error
}

// contextOwner is ContextOwner, with the kind's own check of the owner.
func (m *Mutex) contextOwner(ctx context.Context) (owner string, ok bool, err error) {
	owner, ok, err = ContextOwner(ctx)
	if err == nil && ok {
		if oc, has := m.kind.(OwnerChecker); has {
			err = oc.CheckOwner(owner)
		}
	}
	return owner, ok, err
}

// Lock waits until it holds the lock on the watchdog lease or ctx ends.
func (m *Mutex) Lock(ctx context.Context) error {
	_, _, err := m.Acquire(ctx, NoLimit, 0)
	return err
}

// LockLease waits until it holds the lock on a fixed lease or ctx ends.
func (m *Mutex) LockLease(ctx context.Context, lease time.Duration) error {
	if err := CheckLease(lease); err != nil {
		return err
	}
	_, _, err := m.Acquire(ctx, NoLimit, lease)
	return err
}

// TryLock tries once (wait 0) or waits up to wait: the wait ends the
// sleeping between attempts, never an attempt (see Wait).
func (m *Mutex) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	_, ok, err := m.TryAcquire(ctx, wait, lease)
	return ok, err
}

// TryAcquire is TryLock that also returns the hold's fencing token.
func (m *Mutex) TryAcquire(ctx context.Context, wait, lease time.Duration) (int64, bool, error) {
	if err := CheckWait(wait); err != nil {
		return 0, false, err
	}
	if lease != 0 {
		if err := CheckLease(lease); err != nil {
			return 0, false, err
		}
	}
	return m.Acquire(ctx, wait, lease)
}

// BindOwner returns ctx with the owner an acquisition made with it acts
// for: the one it carries, or a fresh anonymous owner of the Client
// (which only a context from BindOwner carries).
func (m *Mutex) BindOwner(ctx context.Context) (context.Context, string) {
	if owner, ok := OwnerFrom(ctx); ok {
		return ctx, owner
	}
	owner := m.core.anonymousOwner()
	return WithReservedOwner(ctx, owner), owner
}

// ReleasedTwice is the error of a second release of one acquisition (a
// Hold's): nothing is sent to Redis.
func (m *Mutex) ReleasedTwice(owner string) error {
	return fmt.Errorf("%w: lock %q by owner %q: this hold was released already", relock.ErrNotHeld, m.name, owner)
}
