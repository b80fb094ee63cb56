package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/flowrun/flowrun/internal/natstest"
)

// TestConnectWithoutJetStream: a server started without -js is told at
// once, not retried as if it were electing a leader.
func TestConnectWithoutJetStream(t *testing.T) {
	s := natstest.Start(t, &server.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := connect(ctx, Options{URL: s.ClientURL()})
	if err == nil {
		c.nc.Close()
		t.Fatal("connected to a server without JetStream")
	}
	if ctx.Err() != nil {
		t.Errorf("connect retried until its context ended: %v", err)
	}
	if !errors.Is(err, jetstream.ErrJetStreamNotEnabled) || !strings.Contains(err.Error(), "is the server started with -js?") {
		t.Errorf("connecting to a server without JetStream: %v", err)
	}
}

// TestCredsFile: an nkey seed file given as Creds authenticates to a
// server that knows only that nkey; without it the server refuses; a
// seed file others can read is refused before it is used, and a file
// that is neither a credentials file nor a seed is said to be so.
func TestCredsFile(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	s := natstest.Start(t, &server.Options{JetStream: true, StoreDir: t.TempDir(), Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	dir := t.TempDir()
	seedFile := filepath.Join(dir, "worker.nk")
	must(t, os.WriteFile(seedFile, seed, 0o600))
	c := testConn(t, Options{URL: s.ClientURL(), Creds: seedFile})
	if !c.nc.IsConnected() {
		t.Fatal("not connected with the seed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := connect(ctx, Options{URL: s.ClientURL()}); err == nil {
		c.nc.Close()
		t.Error("connected without credentials")
	}
	open := filepath.Join(dir, "open.nk")
	must(t, os.WriteFile(open, seed, 0o644))
	var openErr *OpenFileError
	if _, err := connect(ctx, Options{URL: s.ClientURL(), Creds: open}); !errors.As(err, &openErr) || !strings.Contains(err.Error(), "0644") {
		t.Errorf("a seed file of mode 0644: %v", err)
	}
	garbage := filepath.Join(dir, "garbage")
	must(t, os.WriteFile(garbage, []byte("not a key"), 0o600))
	if _, err := connect(ctx, Options{URL: s.ClientURL(), Creds: garbage}); err == nil || !strings.Contains(err.Error(), "neither a credentials file nor an nkey seed") {
		t.Errorf("a garbage credentials file: %v", err)
	}
}

// TestUserCredentialsFile: a standard NATS credentials file (a user JWT
// and its seed, as nsc writes it) authenticates to a server in operator
// mode that trusts the operator who signed the user's account; the
// streams are made under that account's JetStream limits. Without a
// credentials file, with one whose account the server does not know, or
// with one that does not exist, connecting fails and says why.
func TestUserCredentialsFile(t *testing.T) {
	operator, err := nkeys.CreateOperator()
	must(t, err)
	operatorPub, _ := operator.PublicKey()
	sign := func(c jwt.Claims, by nkeys.KeyPair) string {
		t.Helper()
		s, err := c.Encode(by)
		must(t, err)
		return s
	}
	resolver := &server.MemAccResolver{}
	// account makes an account signed by the operator, registers it with
	// the server when known, and writes a credentials file of a user of
	// it.
	account := func(name string, known bool) (pub, credsFile string) {
		kp, err := nkeys.CreateAccount()
		must(t, err)
		pub, _ = kp.PublicKey()
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		if name != "SYS" { // the system account may not have JetStream
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		if known {
			must(t, resolver.Store(pub, sign(ac, operator)))
		}
		user, err := nkeys.CreateUser()
		must(t, err)
		userPub, _ := user.PublicKey()
		seed, _ := user.Seed()
		uc := jwt.NewUserClaims(userPub)
		uc.Name = name + "-user"
		creds, err := jwt.FormatUserConfig(sign(uc, kp), seed)
		must(t, err)
		credsFile = filepath.Join(t.TempDir(), name+".creds")
		must(t, os.WriteFile(credsFile, creds, 0o600))
		return pub, credsFile
	}
	system, _ := account("SYS", true)
	_, good := account("flowrun", true)
	_, stranger := account("stranger", false)
	oc := jwt.NewOperatorClaims(operatorPub)
	oc.Name = "test-operator"
	oc.SystemAccount = system
	s := natstest.Start(t, &server.Options{JetStream: true, StoreDir: t.TempDir(),
		TrustedOperators: []*jwt.OperatorClaims{oc}, AccountResolver: resolver, SystemAccount: system})

	c := testConn(t, Options{URL: s.ClientURL(), Creds: good})
	if !c.nc.IsConnected() {
		t.Fatal("not connected with the credentials file")
	}
	if _, err := c.js.Stream(context.Background(), itemsStream); err != nil {
		t.Errorf("the items stream was not made under the account: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct{ name, creds, want string }{
		{"no credentials", "", "authorization violation"},
		{"an unknown account", stranger, "authorization violation"},
		{"a missing file", filepath.Join(t.TempDir(), "gone.creds"), "reading the nats credentials"},
	} {
		c, err := connect(ctx, Options{URL: s.ClientURL(), Creds: tc.creds})
		if err == nil {
			c.nc.Close()
			t.Errorf("%s: connected", tc.name)
			continue
		}
		if !strings.Contains(strings.ToLower(err.Error()), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.want)
		}
	}
	if ctx.Err() != nil {
		t.Error("a refused connection was retried until its context ended")
	}
}
