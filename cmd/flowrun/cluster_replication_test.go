package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsCluster is three embedded JetStream servers forming one cluster,
// each started from the nats.conf that docs/scale-out.md shows.
type natsCluster struct {
	t       testing.TB
	servers []*server.Server
	urls    []string
}

// documentedClusterConf is the server configuration in the "Three-node
// cluster" section of docs/scale-out.md.
func documentedClusterConf(t testing.TB) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/scale-out.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Three-node cluster\n")
	if !ok {
		t.Fatal(`docs/scale-out.md has no "## Three-node cluster" section`)
	}
	_, block, ok := strings.Cut(section, "\n```\n")
	conf, _, closed := strings.Cut(block, "\n```\n")
	if !ok || !closed {
		t.Fatal("the Three-node cluster section of docs/scale-out.md shows no nats.conf block")
	}
	return conf + "\n"
}

// freePorts reserves n TCP ports on 127.0.0.1 and frees them for a
// server to take: a route list must name its peers' ports in advance.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// startNATSCluster starts the three servers n1, n2 and n3 of the
// documented configuration, on 127.0.0.1 ports instead of the example
// hosts, and waits for the cluster to elect a JetStream meta leader.
func startNATSCluster(t *testing.T) *natsCluster {
	t.Helper()
	template := documentedClusterConf(t)
	ports := freePorts(t, 6) // a client and a route port per server
	c := &natsCluster{t: t}
	for i := range 3 {
		name := fmt.Sprintf("n%d", i+1)
		dir := t.TempDir()
		conf := strings.NewReplacer(
			"server_name: n1", "server_name: "+name,
			"0.0.0.0:4222", fmt.Sprintf("127.0.0.1:%d", ports[i]),
			"0.0.0.0:6222", fmt.Sprintf("127.0.0.1:%d", ports[3+i]),
			"/var/lib/nats", dir,
			"n1.example:6222", fmt.Sprintf("127.0.0.1:%d", ports[3]),
			"n2.example:6222", fmt.Sprintf("127.0.0.1:%d", ports[4]),
			"n3.example:6222", fmt.Sprintf("127.0.0.1:%d", ports[5]),
		).Replace(template)
		if strings.Contains(conf, "example") || strings.Contains(conf, "/var/lib") || !strings.Contains(conf, "server_name: "+name) {
			t.Fatalf("the nats.conf of docs/scale-out.md changed; adapt the test's substitutions:\n%s", template)
		}
		path := filepath.Join(t.TempDir(), "nats.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		opts, err := server.ProcessConfigFile(path)
		if err != nil {
			t.Fatalf("the nats.conf of docs/scale-out.md does not load: %v\n%s", err, conf)
		}
		if opts.ServerName != name || !opts.JetStream || opts.StoreDir != dir || opts.Port != ports[i] ||
			opts.Cluster.Name != "flowrun" || opts.Cluster.Port != ports[3+i] || len(opts.Routes) != 3 {
			t.Fatalf("the nats.conf of docs/scale-out.md reads as server %q, JetStream %v in %q, port %d, cluster %q on port %d with %d routes\n%s",
				opts.ServerName, opts.JetStream, opts.StoreDir, opts.Port, opts.Cluster.Name, opts.Cluster.Port, len(opts.Routes), conf)
		}
		opts.NoLog, opts.NoSigs = true, true
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatalf("server %s from the documented nats.conf: %v", name, err)
		}
		go s.Start()
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		if !s.ReadyForConnections(20 * time.Second) {
			t.Fatalf("NATS server %s did not start", name)
		}
		c.servers = append(c.servers, s)
		c.urls = append(c.urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
	}
	for deadline := time.Now().Add(30 * time.Second); !c.ready(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the three NATS servers elected no JetStream meta leader in 30s")
		}
	}
	return c
}

// ready says whether the cluster has a meta leader that knows all three
// servers and that every server follows.
func (c *natsCluster) ready() bool {
	leader := false
	for _, s := range c.servers {
		if !s.JetStreamIsCurrent() {
			return false
		}
		// Only the leader lists the peers.
		leader = leader || s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == len(c.servers)
	}
	return leader
}

func (c *natsCluster) url() string { return strings.Join(c.urls, ",") }

func (c *natsCluster) jetStream() jetstream.JetStream {
	nc, err := nats.Connect(c.url())
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatal(err)
	}
	return js
}

// streamLeader is the index of the server leading stream, or -1.
func (c *natsCluster) streamLeader(stream string) int {
	for i, s := range c.servers {
		if s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// TestClusterThreeNodeReplication runs a batch on the documented
// three-node cluster with --nats-replicas 3 and shuts down, mid-batch,
// the server leading FLOWRUN_RUNS: the stream every checkpoint is
// acknowledged by, so that the loss forces an election while the workers
// store checkpoints. The batch completes with one result per item and
// the local outputs, the checkpoints stored before the loss are still
// there after it, and no model call is made twice. With --nats-replicas 1
// it fails: the checkpoints lived on the lost server alone.
func TestClusterThreeNodeReplication(t *testing.T) {
	cl := startNATSCluster(t)
	replicas := []string{"--nats-replicas", "3"}
	// An AckWait longer than an election, so that no item is redelivered
	// while its worker waits for the new leader.
	c := startClusterWorkersOn(t, cl, 16, 2, 100*time.Millisecond, append(replicas, "--ack-wait", "10s")...)
	c.coord = c.startCoordinator(replicas...)
	c.waitRequests(6)
	victim := cl.streamLeader("FLOWRUN_RUNS")
	if victim < 0 {
		t.Fatalf("FLOWRUN_RUNS has no leader\n%s", c.coord.abort())
	}
	before := storedCheckpoints(t, cl.jetStream())
	lost := cl.servers[victim]
	t.Logf("shutting down %s (leads FLOWRUN_RUNS; meta leader: %v; %d checkpoints stored)", lost.Name(), lost.JetStreamIsLeader(), len(before))
	lostAt := time.Now()
	lost.Shutdown()
	lost.WaitForShutdown()
	c.finish(t, c.coord)
	after := 0
	for _, call := range c.workerCalls() {
		if call.at.After(lostAt) {
			after++
		}
	}
	if after == 0 {
		t.Errorf("no model call after the server was lost: the batch ended before")
	}
	for i, w := range c.workers {
		select {
		case <-w.exited():
			t.Errorf("worker %d exited:\n%s", i, w.stderr())
		default:
		}
	}
	c.eachCallOnce(t, "a checkpoint was lost with the server, or an item redelivered while its worker ran it")
	stored := storedCheckpoints(t, cl.jetStream())
	for cp := range before {
		if !stored[cp] {
			t.Errorf("checkpoint %s, stored before the server was lost, is gone", cp)
		}
	}
	if leader := cl.streamLeader("FLOWRUN_RUNS"); leader < 0 || leader == victim {
		t.Errorf("FLOWRUN_RUNS is led by server %d after server %d was lost", leader, victim)
	}
}
