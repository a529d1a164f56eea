package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of masters only, each a redis-server on a
// free loopback port, made with redis-cli --cluster create. It keeps
// serving the slots of the masters that are up when one is killed
// (cluster-require-full-coverage no), and its node timeout is long
// (clusterNodeTimeout), so that no node is ever taken for failed by one
// that is merely slow.
type Cluster struct {
	// Nodes are the masters, in the order redis-cli was given them.
	Nodes []*Server
}

// clusterNodeTimeout is the cluster-node-timeout of every node, in ms. A
// node that has not answered a peer's ping for this long is taken for
// failing, and a master that takes fewer than a majority of the masters
// for up answers every command with "CLUSTERDOWN The cluster is down",
// until some time (up to 5 s) after they are back: with one of three
// masters killed, a survivor that misses the other's pong for this long
// does so. On a loaded machine a process may well stall for the half
// second this was (a SIGSTOP of a second does it at once), so it is far
// longer than any stall a test run sees. Nothing waits for a killed
// master to be marked failed: a call to it fails at once, on its closed
// port.
const clusterNodeTimeout = "30000"

// Addrs returns the masters' addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// close kills every node.
func (c *Cluster) close() {
	for _, n := range c.Nodes {
		n.Kill()
	}
}

// StartCluster3 starts a cluster of three masters for tb, stopped when tb
// ends; or skips tb (fails it when RequireEnv is 1) without redis-server
// and redis-cli. A test that kills a master needs its own; the others
// share one with SharedCluster.
func StartCluster3(tb testing.TB) *Cluster {
	tb.Helper()
	bin, cli := Binary(tb), cliBinary(tb)
	c, err := newCluster(bin, cli, 3)
	if c != nil {
		tb.Cleanup(c.close)
	}
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return c
}

var shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// SharedCluster returns the test binary's one cluster of three masters,
// starting it on first use; Shutdown, from TestMain after m.Run, stops it.
// It skips tb (fails it when RequireEnv is 1) without redis-server and
// redis-cli, and fails it if the cluster could not start. Tests that
// share it must not stop its nodes, and should use keys of their own.
func SharedCluster(tb testing.TB) *Cluster {
	tb.Helper()
	bin, cli := Binary(tb), cliBinary(tb)
	shared.once.Do(func() { shared.c, shared.err = newCluster(bin, cli, 3) })
	if shared.err != nil {
		tb.Fatalf("redistest: the shared cluster: %v", shared.err)
	}
	return shared.c
}

// Shutdown stops the shared cluster, if SharedCluster started one. Call
// it from TestMain after m.Run.
func Shutdown() {
	if shared.c != nil {
		shared.c.close()
	}
}

// cliBinary returns the path of redis-cli, or skips tb (fails it when
// RequireEnv is 1).
func cliBinary(tb testing.TB) string {
	tb.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("redis-cli not found on PATH and %s=1: %v", RequireEnv, err)
		}
		tb.Skipf("redis-cli not found on PATH (%v); it comes with redis-server", err)
	}
	return cli
}

// clusterStartLimit bounds redis-cli --cluster create, and then the wait
// for every node to be ok: a limit, not a wait (both end as soon as they
// can), generous because on a 2-core machine under a load of 20 the
// create alone once took more than a minute.
const clusterStartLimit = 3 * time.Minute

// newCluster starts masters nodes in cluster mode and joins them with
// redis-cli --cluster create, then waits until every node sees every slot
// served and every node known. On error it returns the nodes it started,
// for the caller to kill.
func newCluster(bin, cli string, masters int) (*Cluster, error) {
	c := &Cluster{}
	for range masters {
		dir, err := os.MkdirTemp("", "redistest-cluster-")
		if err != nil {
			return c, err
		}
		s, err := launch(nil, bin, dir,
			"--cluster-enabled", "yes",
			"--cluster-config-file", dir+"/nodes.conf",
			"--cluster-node-timeout", clusterNodeTimeout,
			"--cluster-require-full-coverage", "no")
		if err != nil {
			return c, err
		}
		s.tempDir = dir
		c.Nodes = append(c.Nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), clusterStartLimit)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		return c, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Every node must be ok in one pass: a node may leave the ok state
	// again while another is polled.
	want := []string{"cluster_state:ok\r\n", "cluster_slots_ok:16384\r\n", "cluster_known_nodes:" + strconv.Itoa(masters) + "\r\n"}
	deadline := time.Now().Add(clusterStartLimit)
	for ok := false; !ok; {
		ok = true
		for _, n := range c.Nodes {
			info, err := command(n.Addr(), 10*time.Second, "CLUSTER", "INFO")
			for _, w := range want {
				ok = ok && err == nil && strings.Contains(info, w)
			}
			if ok {
				continue
			}
			if time.Now().After(deadline) {
				return c, fmt.Errorf("the cluster is not ok at %s within %v: %q, %v", n.Addr(), clusterStartLimit, info, err)
			}
			// Poll again from the first node, after a pause that leaves
			// the nodes the CPU to agree on a loaded machine.
			time.Sleep(10 * time.Millisecond)
			break
		}
	}
	return c, nil
}
