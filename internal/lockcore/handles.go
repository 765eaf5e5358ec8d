package lockcore

// The constructors of the handles of the kinds that live in packages of
// their own (fairlock, rwlock, semaphore, latch). Each package sets its
// own from an init function, and rlock's Client calls them: the handles
// are made by the Client only, and no public function takes a *Core.
var (
	NewFairLock       func(c *Core, name string) any
	NewReadWriteLock  func(c *Core, name string) any
	NewSemaphore      func(c *Core, name string) any
	NewCountDownLatch func(c *Core, name string) any
)
