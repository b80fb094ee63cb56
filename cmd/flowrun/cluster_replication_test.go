package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// natsCluster is three embedded JetStream servers forming one cluster,
// each started from the nats.conf that docs/scale-out.md shows: TLS, and
// an admin, a coordinator and a worker user with their own nkeys.
type natsCluster struct {
	t       testing.TB
	servers []*server.Server
	urls    []string
	ca      string
	seeds   map[string]string // role -> nkey seed file
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

// documentedNkeys are the example public keys of the admin, the
// coordinator and the worker in the documented nats.conf, which the test
// replaces with its own.
var documentedNkeys = []string{"UAHJODLKKFL5OVOO6CNKO6MEPDPL5GOIOIH3P53POMLBMBP4ZFZPBP7H", "UAVY6WH65Z225DFNT66RAM6NQHPDVKLZVPBXPLBG3GTVXYNEXZSSLAI7", "UDU5FDOESA5OZ2Z62SMT7OKBIXXYUBZTGUXUF4ZR7XOFMRFA65A3PIJ5"}

// writeTestTLS writes ca.pem, and server.pem and server-key.pem for
// 127.0.0.1 signed by it (for both server and client use: routes are
// both), into dir; it returns ca.pem's path.
func writeTestTLS(t *testing.T, dir string) string {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flowrun test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	ca, _ := x509.ParseCertificate(caDER)
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pemFile := func(name, kind string, der []byte) string {
		return writeFile(t, dir, name, string(pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})))
	}
	pemFile("server.pem", "CERTIFICATE", der)
	pemFile("server-key.pem", "EC PRIVATE KEY", keyDER)
	return pemFile("ca.pem", "CERTIFICATE", caDER)
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
// hosts, with accounts added to it, and waits for the cluster to elect a
// JetStream meta leader.
func startNATSCluster(t *testing.T, accounts ...string) *natsCluster {
	t.Helper()
	template := documentedClusterConf(t)
	if !strings.Contains(template, "\naccounts {\n") {
		t.Fatalf("the nats.conf of docs/scale-out.md has no accounts block:\n%s", template)
	}
	template = strings.Replace(template, "\naccounts {\n", "\naccounts {\n"+strings.Join(accounts, "\n")+"\n", 1)
	ports := freePorts(t, 6) // a client and a route port per server
	tlsDir := t.TempDir()
	c := &natsCluster{t: t, ca: writeTestTLS(t, tlsDir), seeds: map[string]string{}}
	users := []string{}
	for i, role := range []string{"admin", "coordinator", "worker"} {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		seed, _ := kp.Seed()
		c.seeds[role] = filepath.Join(tlsDir, role+".nk")
		if err := os.WriteFile(c.seeds[role], seed, 0o600); err != nil {
			t.Fatal(err)
		}
		users = append(users, documentedNkeys[i], pub)
	}
	for i := range 3 {
		name := fmt.Sprintf("n%d", i+1)
		dir := t.TempDir()
		conf := strings.NewReplacer(append([]string{
			"server_name: n1", "server_name: " + name,
			"0.0.0.0:4222", fmt.Sprintf("127.0.0.1:%d", ports[i]),
			"0.0.0.0:6222", fmt.Sprintf("127.0.0.1:%d", ports[3+i]),
			"/var/lib/nats", dir,
			"/etc/nats/tls/", tlsDir + "/",
			"n1.example:6222", fmt.Sprintf("127.0.0.1:%d", ports[3]),
			"n2.example:6222", fmt.Sprintf("127.0.0.1:%d", ports[4]),
			"n3.example:6222", fmt.Sprintf("127.0.0.1:%d", ports[5]),
		}, users...)...).Replace(template)
		if strings.Contains(conf, "example") || strings.Contains(conf, "/var/lib") || strings.Contains(conf, "/etc/nats") || !strings.Contains(conf, "server_name: "+name) {
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
			opts.Cluster.Name != "flowrun" || opts.Cluster.Port != ports[3+i] || len(opts.Routes) != 3 ||
			opts.TLSConfig == nil || opts.Cluster.TLSConfig == nil || len(opts.Nkeys) != 3 {
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
		c.urls = append(c.urls, fmt.Sprintf("tls://127.0.0.1:%d", ports[i]))
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

func (c *natsCluster) flags(role string) []string {
	return []string{"--nats-creds", c.seeds[role], "--nats-ca", c.ca}
}

// connect is a client of the test's own, as role.
func (c *natsCluster) connect(role string, opts ...nats.Option) (*nats.Conn, error) {
	opts = append(opts, nats.RootCAs(c.ca))
	if role != "" {
		nk, err := nats.NkeyOptionFromSeed(c.seeds[role])
		if err != nil {
			return nil, err
		}
		opts = append(opts, nk)
	}
	return nats.Connect(c.url(), opts...)
}

func (c *natsCluster) jetStream() jetstream.JetStream {
	nc, err := c.connect("admin")
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

// createStream creates cfg as the admin, asking again as cluster setup
// does: a request the new meta leader drops gets no answer at all, so one
// request waited for the whole test's deadline (CI once hung 12 minutes).
func (c *natsCluster) createStream(t *testing.T, cfg jetstream.StreamConfig) {
	t.Helper()
	js := c.jetStream()
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = js.CreateStream(ctx, cfg)
		cancel()
		if err == nil {
			return
		}
		t.Logf("creating stream %s: %v; asking again", cfg.Name, err)
	}
	t.Fatalf("creating stream %s: %v", cfg.Name, err)
}

// setup runs flowrun cluster setup on the cluster with the admin's
// credential.
func (c *natsCluster) setup(t *testing.T, args ...string) {
	t.Helper()
	code, stdout, stderr := flowrun(t, append([]string{"cluster", "setup", "--nats", c.url()}, append(c.flags("admin"), args...)...)...)
	if code != exitOK {
		t.Fatalf("flowrun cluster setup: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestClusterDocumentedPermissions: the nats.conf of docs/scale-out.md
// gives each role the permissions flowrun cluster permissions prints
// (cluster.Permissions), so that the tests of the documented servers
// test those.
func TestClusterDocumentedPermissions(t *testing.T) {
	code, perms, stderr := flowrun(t, "cluster", "permissions")
	if code != exitOK {
		t.Fatalf("flowrun cluster permissions: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(documentedClusterConf(t), perms) {
		t.Errorf("the nats.conf of docs/scale-out.md does not hold the output of flowrun cluster permissions:\n%s", perms)
	}
}

// streamLeader is the index of the server leading stream, or -1.
func (c *natsCluster) streamLeader(stream string) int {
	for i, s := range c.servers {
		if s.JetStreamIsStreamLeader("FLOWRUN", stream) {
			return i
		}
	}
	return -1
}

// TestClusterThreeNodeReplication sets up the documented three-node
// cluster with flowrun cluster setup --nats-replicas 3 (the admin
// credential), runs a batch on it and shuts down, mid-batch,
// the server leading FLOWRUN_RUNS: the stream every checkpoint is
// acknowledged by, so that the loss forces an election while the workers
// store checkpoints. The batch completes with one result per item and
// the local outputs, the checkpoints stored before the loss are still
// there after it, and no model call is made twice. With --nats-replicas 1
// it fails: the checkpoints lived on the lost server alone.
func TestClusterThreeNodeReplication(t *testing.T) {
	cl := startNATSCluster(t)
	// An AckWait longer than an election, so that no item is redelivered
	// while its worker waits for the new leader.
	cl.setup(t, "--nats-replicas", "3", "--ack-wait", "10s")
	c := startClusterWorkersOn(t, cl, 16, 2, 100*time.Millisecond)
	c.coord = c.startCoordinator()
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

// TestClusterLockedDownServer: the documented server refuses a client
// without credentials, shows flowrun's streams to no other account, and
// lets each role publish only its part: a worker can queue no job and
// stop no batch; the coordinator can publish no run's event or checkpoint
// and record no result.
func TestClusterLockedDownServer(t *testing.T) {
	cl := startNATSCluster(t, "  OTHER {jetstream: enabled, users: [{user: other, password: s3cret}]}")
	if nc, err := cl.connect(""); err == nil {
		nc.Close()
		t.Fatal("the documented server let a client without credentials in")
	}
	// Another account, with JetStream of its own, sees none of flowrun's.
	ctx, cancel := context.WithTimeout(context.Background(), durDeadline)
	defer cancel()
	cl.createStream(t, jetstream.StreamConfig{Name: "FLOWRUN_RUNS", Subjects: []string{"flowrun.ev.>"}})
	other, err := cl.connect("", nats.UserInfo("other", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	otherJS, _ := jetstream.New(other)
	if _, err := otherJS.Stream(ctx, "FLOWRUN_RUNS"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("another account looking up FLOWRUN_RUNS: %v, want not found", err)
	}
	for role, subjects := range map[string][]string{
		"worker":      {"flowrun.items.b1.0", "$KV.flowrun-stops.b1"},
		"coordinator": {"flowrun.ev.r1", "flowrun.cp.r1", "$KV.flowrun-results.b1.0.k"},
	} {
		errs := make(chan error, len(subjects))
		nc, err := cl.connect(role, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		for _, subject := range subjects {
			if err := nc.Publish(subject, []byte("{}")); err != nil {
				t.Fatal(err)
			}
			_ = nc.Flush()
			select {
			case err := <-errs:
				if !strings.Contains(err.Error(), "Permissions Violation") || !strings.Contains(err.Error(), subject) {
					t.Errorf("%s publishing on %s: %v", role, subject, err)
				}
			case <-time.After(durDeadline):
				t.Errorf("the %s was let publish on %s", role, subject)
			}
		}
		nc.Close()
	}
}
