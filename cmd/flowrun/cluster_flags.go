package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/cluster"
)

// keygenHint says how to make the keys --nats needs.
const keygenHint = "make keys with: flowrun cluster keygen --out DIR (the coordinator's), and flowrun cluster keygen --out DIR --name worker (the workers')"

// natsFlags are the flags that say how batch, batch resume and worker
// reach NATS and whom they trust.
type natsFlags struct {
	cluster.KeyFiles
}

func (f *natsFlags) register(fs *flag.FlagSet, worker bool) {
	fs.StringVar(&f.Creds, "nats-creds", "", "authenticate to NATS with this credentials `file` (a user JWT and seed) or nkey seed file; use a tls:// URL for TLS")
	fs.StringVar(&f.CA, "nats-ca", "", "trust the NATS server's TLS certificate when signed by an authority in this PEM `file` (default: the system's)")
	fs.BoolVar(&f.Insecure, "nats-insecure", false, "accept unsigned jobs, results and events: anyone who can publish on the server can then run code here; only for a server no one else reaches")
	fs.Var((*inputFlags)(&f.TrustWorker), "nats-trust-worker", "accept checkpoints, events and results signed by this worker public `key` file (repeatable)")
	if worker {
		fs.StringVar(&f.Sign, "nats-sign", "", "sign this worker's checkpoints, events and results with this private `key` file")
		fs.Var((*inputFlags)(&f.Trust), "nats-trust", "run only jobs signed by this coordinator public `key` file (repeatable)")
		return
	}
	fs.StringVar(&f.Sign, "nats-sign", "", "sign the jobs with this coordinator private `key` file")
}

// options are the cluster options the flags give, for a worker or a
// coordinator; an error says which flags are missing.
func (f *natsFlags) options(url string, worker bool) (cluster.Options, error) {
	o, err := f.KeyFiles.Options(url, worker)
	var missing *cluster.MissingKeysError
	switch {
	case errors.As(err, &missing) && missing.NoTrust:
		return o, fmt.Errorf("a worker runs only jobs signed by a coordinator it trusts: give --nats-trust COORDINATOR.pub and --nats-sign WORKER.key; %s. On a server no one else can reach, --nats-insecure runs anyone's jobs", keygenHint)
	case errors.As(err, &missing):
		flags := "--nats-sign COORDINATOR.key and --nats-trust-worker WORKER.pub"
		if worker {
			flags = "--nats-sign WORKER.key"
		}
		return o, fmt.Errorf("give %s; %s. On a server no one else can reach, --nats-insecure skips signatures", flags, keygenHint)
	case errors.As(err, new(*cluster.OpenFileError)):
		return o, chmodHint(err)
	case err != nil:
		return o, fmt.Errorf("%w (%s)", err, keygenHint)
	}
	return o, nil
}

// record keeps the flags with a batch's settings, so that batch resume
// finds its keys again: paths only, never a key.
func (f *natsFlags) record(s *batch.Settings) {
	s.NATSCreds, s.NATSCA, s.NATSSign, s.NATSTrustWorker, s.NATSInsecure =
		absOrEmpty(f.Creds), absOrEmpty(f.CA), absOrEmpty(f.Sign), absAll(f.TrustWorker), f.Insecure
}

// use takes the NATS settings of a batch about to resume: those it
// recorded, or those the resume gives.
func (f *natsFlags) use(s batch.Settings) {
	f.Creds, f.CA, f.Sign, f.TrustWorker, f.Insecure = s.NATSCreds, s.NATSCA, s.NATSSign, s.NATSTrustWorker, s.NATSInsecure
}

func absAll(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = absOrEmpty(p)
	}
	return out
}

const clusterUsage = "flowrun cluster: the subcommands are keygen, setup, permissions and creds: flowrun cluster keygen --out DIR [--name NAME], flowrun cluster setup --nats URL --nats-creds ADMIN.creds, flowrun cluster permissions, flowrun cluster creds --role ROLE --account-seed FILE --out FILE"

func clusterCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, clusterUsage)
		return exitInvalid
	}
	switch args[0] {
	case "keygen":
		return keygenCmd(args[1:], stdout, stderr)
	case "setup":
		return setupCmd(ctx, args[1:], stdout, stderr)
	case "creds":
		return credsCmd(args[1:], stdout, stderr)
	case "permissions":
		fs := newFlagSet("cluster permissions", "flowrun cluster permissions\n\nPrints the permissions of the admin, coordinator and worker NATS users,\nin nats-server's configuration syntax (see docs/scale-out.md).")
		rest, code, ok := parseFlags(fs, args[1:], stdout, stderr)
		if !ok {
			return code
		}
		if len(rest) != 0 {
			fmt.Fprintln(stderr, "flowrun cluster permissions takes no arguments")
			return exitInvalid
		}
		fmt.Fprint(stdout, cluster.ServerPermissions())
		return exitOK
	}
	fmt.Fprintln(stderr, clusterUsage)
	return exitInvalid
}

func setupCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("cluster setup", "flowrun cluster setup --nats URL --nats-creds ADMIN.creds [--nats-replicas N] [--ack-wait D] [--runs-max-bytes N]\n\nCreates flowrun's streams, key-value buckets, object store and the workers'\nconsumer on the NATS server, with their limits, or brings existing ones to\nthem. It needs the admin credential; coordinators and workers then only\nuse what it made (see flowrun cluster permissions).")
	url := fs.String("nats", "", "the NATS server `URL` (required)")
	creds := fs.String("nats-creds", "", "authenticate with the admin's credentials `file` (a user JWT and seed) or nkey seed file")
	ca := fs.String("nats-ca", "", "trust the NATS server's TLS certificate when signed by an authority in this PEM `file`")
	replicas := fs.Int("nats-replicas", 1, "copies JetStream keeps of each stream (3 on a three-node cluster)")
	ackWait := fs.Duration("ack-wait", 30*time.Second, "hand an item to another worker when its worker has been silent for `duration` (workers heartbeat at a third of it)")
	runsBytes := fs.Int64("runs-max-bytes", 8<<30, "the most `bytes` FLOWRUN_RUNS (every run's checkpoints and events) may hold")
	rest, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) != 0 || *url == "" {
		fmt.Fprintln(stderr, "flowrun cluster setup: give the NATS server: flowrun cluster setup --nats nats://HOST:4222 --nats-creds ADMIN.creds")
		return exitInvalid
	}
	o := cluster.Options{URL: *url, Creds: *creds, CA: *ca, Name: "flowrun cluster setup"}
	err := cluster.Setup(ctx, o, cluster.SetupOptions{Replicas: *replicas, AckWait: *ackWait, RunsMaxBytes: *runsBytes})
	if err != nil {
		fmt.Fprintf(stderr, "flowrun cluster setup: %v\n", clusterHint(err))
		return exitFailed
	}
	fmt.Fprintf(stdout, "flowrun's streams and buckets are set up on %s\n", cluster.DisplayURL(*url))
	return exitOK
}

func credsCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("cluster creds", "flowrun cluster creds --role admin|coordinator|worker --account-seed FILE --out FILE\n\nWrites a NATS credentials file (a user JWT and its seed, mode 0600) for a new\nuser of the role, with the role's permissions (flowrun cluster permissions),\nsigned by flowrun's account: for a server in operator mode.")
	role := fs.String("role", "", "the user's `role`: admin, coordinator or worker (required)")
	seedFile := fs.String("account-seed", "", "the account's nkey seed `file` (required; readable by its owner only)")
	out := fs.String("out", "", "the credentials `file` to write (required; never overwritten)")
	rest, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) != 0 || *role == "" || *seedFile == "" || *out == "" {
		fmt.Fprintln(stderr, "flowrun cluster creds: give --role, --account-seed and --out: flowrun cluster creds --role worker --account-seed FLOWRUN.nk --out worker.creds")
		return exitInvalid
	}
	seed, err := cluster.ReadPrivate(*seedFile, "account seed")
	if err == nil {
		err = cluster.WriteUserCreds(cluster.Role(*role), seed, *out)
	}
	if err != nil {
		fmt.Fprintf(stderr, "flowrun cluster creds: %v\n", clusterHint(err))
		return exitFailed
	}
	fmt.Fprintf(stdout, "wrote %s: a %s of flowrun's account (give it with --nats-creds)\n", *out, *role)
	return exitOK
}

func keygenCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("cluster keygen", "flowrun cluster keygen --out DIR [--name NAME]\n\nWrites an Ed25519 key pair for --nats: DIR/NAME.key (private, mode 0600)\nand DIR/NAME.pub. The coordinator signs jobs with coordinator.key; workers\nrun only jobs signed by a key given with --nats-trust. Workers sign what\nthey publish with their own key (--name worker), which coordinators trust\nwith --nats-trust-worker.")
	out := fs.String("out", "", "the `directory` to write the keys in (required)")
	name := fs.String("name", "coordinator", "the keys' file `name`: NAME.key and NAME.pub")
	rest, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) != 0 || *out == "" {
		fmt.Fprintln(stderr, "flowrun cluster keygen: give the directory: flowrun cluster keygen --out DIR")
		return exitInvalid
	}
	key, pub, err := cluster.GenerateKey(*out, *name)
	if err != nil {
		fmt.Fprintf(stderr, "flowrun cluster keygen: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "wrote %s (private: keep it on this machine) and %s\n", key, pub)
	return exitOK
}

// clusterHint adds what to type to a cluster error: the setup a locked-down
// server needs, or the mode a private file needs.
func clusterHint(err error) error {
	if errors.Is(err, cluster.ErrNotSetUp) {
		return fmt.Errorf("%w: flowrun cluster setup --nats URL --nats-creds ADMIN.creds", err)
	}
	return chmodHint(err)
}

// chmodHint adds what to type when a private file is open to others.
func chmodHint(err error) error {
	var open *cluster.OpenFileError
	if errors.As(err, &open) {
		return fmt.Errorf("%w; run: chmod 600 %s", err, open.Path)
	}
	return err
}
