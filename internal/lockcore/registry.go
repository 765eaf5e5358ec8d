package lockcore

import (
	"fmt"
	"sync"
)

// The kinds that live in packages of their own (fairlock, rwlock,
// semaphore, latch) and the shared handle (package handle) are made by the
// Client only: no public function takes a *Core. Each of those packages
// registers its constructor in its init with Provide, and rlock's Client
// finds it with Use, by the constructor's type: typed at both ends, in the
// way database/sql finds a driver.

var constructors sync.Map // constructorKey[F] -> F

type constructorKey[F any] struct{}

// Provide registers f, a constructor, under its type F. It is called from
// init functions.
func Provide[F any](f F) { constructors.Store(constructorKey[F]{}, f) }

// Use returns the constructor of type F that a package registered with
// Provide. It panics when none did: a package that provides it is not
// linked in, a programming error.
func Use[F any]() F {
	f, ok := constructors.Load(constructorKey[F]{})
	if !ok {
		var zero F
		panic("relock: no constructor registered for " + typeName(zero))
	}
	return f.(F)
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }
