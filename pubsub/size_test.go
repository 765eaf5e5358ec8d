package pubsub

import (
	"testing"
	"unsafe"
)

// TestWaiterSizes guards what the hub keeps for a waiter and for its
// channel (issue 35, waiting memory: a Client with 10,000 waiters on as
// many locks keeps 10,000 of each): each fits the allocation size class
// it was brought down to.
func TestWaiterSizes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the sizes are a 64-bit platform's")
	}
	if n := unsafe.Sizeof(Waiter{}); n > 80 {
		t.Errorf("Waiter is %d bytes, more than 80", n)
	}
	if n := unsafe.Sizeof(topic{}); n > 80 {
		t.Errorf("topic is %d bytes, more than 80", n)
	}
}
