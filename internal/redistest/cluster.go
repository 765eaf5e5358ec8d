package redistest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// clusterTimeout bounds how long a new cluster may take to agree that it
// is ok.
const clusterTimeout = 15 * time.Second

// Cluster is a local Redis Cluster of master-only nodes, made with
// redis-cli --cluster create.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts a cluster of n masters (at least 3) for tb, waits
// until every node reports cluster_state:ok, and stops it when tb ends.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	c, err := startCluster(n)
	require.NoError(tb, err, "redistest")
	tb.Cleanup(c.Stop)
	return c
}

func startCluster(n int) (*Cluster, error) {
	if n < 3 {
		return nil, errors.New("a cluster needs at least 3 masters")
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return nil, errors.New("redis-cli is not in PATH: install it with `apt-get install -y redis-tools`")
	}
	c := &Cluster{}
	for range n {
		s, err := StartServer("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000")
		if err != nil {
			c.Stop()
			return nil, err
		}
		if s.proc == nil {
			c.Stop()
			_ = s.Stop()
			return nil, errors.New("a cluster needs local redis-server processes, not containers")
		}
		c.Nodes = append(c.Nodes, s)
	}
	args := []string{"--cluster", "create"}
	for _, s := range c.Nodes {
		args = append(args, s.Addr)
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v: %s", err, out)
	}
	if err := c.waitOK(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// waitOK waits until every node sees the cluster as ok and knows every
// other node.
func (c *Cluster) waitOK() error {
	deadline := time.Now().Add(clusterTimeout)
	for time.Now().Before(deadline) {
		ok := true
		for _, s := range c.Nodes {
			msg, err := s.Do(context.Background(), "CLUSTER", "INFO")
			info, _ := msg.ToString()
			if err != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(c.Nodes))) {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		time.Sleep(20 * time.Millisecond) // the poll interval: the cluster state sends no notification
	}
	return errors.New("cluster did not reach cluster_state:ok in time")
}

// Addrs are the nodes' addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		out[i] = s.Addr
	}
	return out
}

// ClientOption returns rueidis options for a cluster client.
func (c *Cluster) ClientOption() rueidis.ClientOption {
	return rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true}
}

// Stop stops every node.
func (c *Cluster) Stop() {
	for _, s := range c.Nodes {
		_ = s.Stop()
	}
}

// NodeFor returns the node that serves key's slot.
func (c *Cluster) NodeFor(ctx context.Context, key string) (*Server, error) {
	msg, err := c.Nodes[0].Do(ctx, "CLUSTER", "KEYSLOT", key)
	if err != nil {
		return nil, err
	}
	slot, _ := msg.AsInt64()
	msg, err = c.Nodes[0].Do(ctx, "CLUSTER", "SLOTS")
	if err != nil {
		return nil, err
	}
	ranges, _ := msg.ToArray()
	for _, r := range ranges {
		parts, _ := r.ToArray()
		if len(parts) < 3 {
			continue
		}
		lo, _ := parts[0].AsInt64()
		hi, _ := parts[1].AsInt64()
		master, _ := parts[2].ToArray()
		if slot < lo || slot > hi || len(master) < 2 {
			continue
		}
		port, _ := master[1].AsInt64()
		for _, s := range c.Nodes {
			if s.Port == int(port) {
				return s, nil
			}
		}
	}
	return nil, fmt.Errorf("no node serves slot %d", slot)
}

// Sentinel is a monitored master with one replica and three sentinels.
type Sentinel struct {
	Master    *Server
	Replica   *Server
	Sentinels []*Server
	// MasterSet is the name the sentinels monitor the master under.
	MasterSet string
}

// StartSentinel starts a master, a replica of it and three sentinels that
// monitor it (quorum 2, down after 1s), and stops them when tb ends.
func StartSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	s, err := startSentinel()
	require.NoError(tb, err, "redistest")
	tb.Cleanup(s.Stop)
	return s
}

func startSentinel() (*Sentinel, error) {
	st := &Sentinel{MasterSet: "relockmaster"}
	var err error
	if st.Master, err = StartServer(); err != nil {
		return nil, err
	}
	if st.Master.proc == nil {
		st.Stop()
		return nil, errors.New("sentinel tests need local redis-server processes, not containers")
	}
	if st.Replica, err = StartServer("--replicaof", "127.0.0.1", strconv.Itoa(st.Master.Port)); err != nil {
		st.Stop()
		return nil, err
	}
	conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\n"+
		"sentinel down-after-milliseconds %[1]s 1000\n"+
		"sentinel failover-timeout %[1]s 5000\n"+
		"sentinel parallel-syncs %[1]s 1\n", st.MasterSet, st.Master.Port)
	for range 3 {
		s, err := startWith(conf, "--sentinel")
		if err != nil {
			st.Stop()
			return nil, err
		}
		st.Sentinels = append(st.Sentinels, s)
	}
	if err := st.waitReady(); err != nil {
		st.Stop()
		return nil, err
	}
	return st, nil
}

// waitReady waits until the replica is in sync and every sentinel knows
// the replica and the other sentinels.
func (st *Sentinel) waitReady() error {
	deadline := time.Now().Add(30 * time.Second)
	ctx := context.Background()
	for time.Now().Before(deadline) {
		ready := true
		msg, err := st.Replica.Do(ctx, "INFO", "replication")
		info, _ := msg.ToString()
		if err != nil || !strings.Contains(info, "master_link_status:up") {
			ready = false
		}
		for _, s := range st.Sentinels {
			if !ready {
				break
			}
			msg, err := s.Do(ctx, "SENTINEL", "MASTER", st.MasterSet)
			if err != nil {
				ready = false
				break
			}
			fields, _ := msg.AsStrMap()
			if fields["num-slaves"] != "1" || fields["num-other-sentinels"] != "2" {
				ready = false
			}
		}
		if ready {
			return nil
		}
		time.Sleep(50 * time.Millisecond) // the poll interval: the sentinels send no notification
	}
	return errors.New("sentinel setup not ready in time")
}

// ClientOption returns rueidis options for a client that finds the master
// through the sentinels.
func (st *Sentinel) ClientOption() rueidis.ClientOption {
	addrs := make([]string, len(st.Sentinels))
	for i, s := range st.Sentinels {
		addrs[i] = s.Addr
	}
	return rueidis.ClientOption{
		InitAddress:  addrs,
		DisableCache: true,
		Sentinel:     rueidis.SentinelOption{MasterSet: st.MasterSet},
	}
}

// MasterAddr asks a sentinel which address is the master now.
func (st *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	for _, s := range st.Sentinels {
		msg, err := s.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", st.MasterSet)
		if err != nil {
			continue
		}
		parts, err := msg.AsStrSlice()
		if err == nil && len(parts) == 2 {
			return parts[0] + ":" + parts[1], nil
		}
	}
	return "", errors.New("no sentinel answered")
}

// Stop stops every process.
func (st *Sentinel) Stop() {
	for _, s := range append([]*Server{st.Master, st.Replica}, st.Sentinels...) {
		if s != nil {
			_ = s.Stop()
		}
	}
}
