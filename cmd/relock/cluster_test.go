package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rlock"
)

// TestOnCluster runs run, status, unlock and demo against a Redis Cluster,
// given the address of one node only, on names served by every node.
func TestOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c, err := rlock.NewClient(cl.ClientOption())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	addr := cl.Nodes[0].Addr

	// One name per node, and one with a hash tag.
	var names []string
	seen := map[string]bool{}
	for i := 0; len(seen) < len(cl.Nodes) && i < 1000; i++ {
		name := fmt.Sprintf("cluster-%d", i)
		node, err := cl.NodeFor(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if !seen[node.Addr] {
			seen[node.Addr] = true
			names = append(names, name)
		}
	}
	names = append(names, "tagged{x}lock")

	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			wantCode(t, relock(t, "run", "--redis", addr, name, "--", "true"), 0)
			holder := rlock.WithOwner(t.Context(), "holder")
			l := c.GetFairLock(name)
			if err := l.Lock(holder); err != nil {
				t.Fatal(err)
			}
			st := status(t, addr, name)
			if len(st.Holders) != 1 || st.Holders[0].Field != c.ID()+":holder" {
				t.Errorf("holders = %+v, want %s:holder", st.Holders, c.ID())
			}
			wantCode(t, relock(t, "unlock", "--force", "--redis", addr, name), 0)
			if locked, err := l.IsLocked(t.Context()); err != nil || locked {
				t.Errorf("IsLocked after unlock --force = %v, %v", locked, err)
			}
		})
	}

	// The whole seed list, before the subcommand.
	t.Run("seed list", func(t *testing.T) {
		seeds := strings.Join(cl.Addrs(), ",")
		r := relock(t, "--redis", seeds, "run", names[0], "--", "echo", "ran")
		wantCode(t, r, 0)
		if r.stdout != "ran\n" {
			t.Errorf("stdout = %q, want %q", r.stdout, "ran\n")
		}
	})

	t.Run("demo", func(t *testing.T) {
		r := relock(t, "demo", "--duration", "1s", "--workers", "2", "--redis", addr)
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, "violations: 0") || strings.Contains(r.stdout, "failed") {
			t.Errorf("demo output:\n%s", r.stdout)
		}
	})
}
