package cluster

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// Permissions are the subjects a role's NATS user may publish and
// subscribe to: the least each needs, so that the server itself refuses
// the rest. Only the admin may create, update, purge or delete a stream
// or consumer; a coordinator queues jobs, writes stops and uploads files;
// a worker takes jobs through the workers' consumer and writes
// checkpoints, events, results, rate budgets and the record of the jobs
// it took. Both read what they need by subject and follow through ordered
// consumers of their own on the streams they follow, never on the work
// queue.
func Permissions(role Role) (jwt.Permissions, error) {
	var p jwt.Permissions
	p.Sub.Allow.Add("_INBOX.>")
	switch role {
	case RoleAdmin:
		p.Pub.Allow.Add("$JS.API.>")
		return p, nil
	case RoleCoordinator, RoleWorker:
	default:
		return p, fmt.Errorf("no role %q: the roles are %s, %s and %s", role, RoleAdmin, RoleCoordinator, RoleWorker)
	}
	allow := func(subjects ...string) { p.Pub.Allow.Add(subjects...) }
	allow("$JS.API.INFO")
	for _, s := range stores {
		st := s.stream()
		allow("$JS.API.STREAM.INFO." + st)
		if slices.Contains(s.write, role) {
			allow(s.subjects()...)
		}
		if slices.Contains(s.read, role) {
			// Direct gets: the last message of a subject, or the next
			// one from a sequence.
			allow("$JS.API.DIRECT.GET."+st, "$JS.API.DIRECT.GET."+st+".>", "$JS.API.STREAM.MSG.GET."+st)
		}
		if slices.Contains(s.follow, role) {
			allow("$JS.API.CONSUMER.CREATE."+st+".>", "$JS.API.CONSUMER.INFO."+st+".*", "$JS.API.CONSUMER.DELETE."+st+".*",
				"$JS.API.CONSUMER.MSG.NEXT."+st+".*", "$JS.FC."+st+".>")
		}
	}
	if role == RoleWorker {
		allow("$JS.API.CONSUMER.INFO."+itemsStream+"."+workerConsumer, "$JS.API.CONSUMER.MSG.NEXT."+itemsStream+"."+workerConsumer,
			"$JS.ACK."+itemsStream+"."+workerConsumer+".>")
	}
	// Named, though allowed by nothing above, so that a wider allow added
	// by hand keeps them refused.
	p.Pub.Deny.Add("$JS.API.STREAM.CREATE.>", "$JS.API.STREAM.UPDATE.>", "$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.>",
		"$JS.API.STREAM.MSG.DELETE.>", "$JS.API.STREAM.RESTORE.>", "$JS.API.CONSUMER.DURABLE.CREATE.>",
		"$JS.API.CONSUMER.CREATE."+itemsStream+".>", "$JS.API.CONSUMER.DELETE."+itemsStream+".>")
	return p, nil
}

// Roles are the roles that hold credentials, in the order a server's
// configuration lists them.
var Roles = []Role{RoleAdmin, RoleCoordinator, RoleWorker}

// ServerPermissions is the permissions of every role in nats-server's
// configuration syntax: a variable per role (ADMIN, COORDINATOR,
// WORKER), for the users of flowrun's account to name, e.g.
// {nkey: U..., permissions: $WORKER}.
func ServerPermissions() string {
	var b strings.Builder
	for _, role := range Roles {
		p, _ := Permissions(role)
		fmt.Fprintf(&b, "%s = {\n  publish: {\n    allow: %s\n", strings.ToUpper(string(role)), confList(p.Pub.Allow))
		if len(p.Pub.Deny) > 0 {
			fmt.Fprintf(&b, "    deny: %s\n", confList(p.Pub.Deny))
		}
		fmt.Fprintf(&b, "  }\n  subscribe: {allow: %s}\n}\n", confList(p.Sub.Allow))
	}
	return b.String()
}

func confList(subjects []string) string {
	quoted := make([]string, len(subjects))
	for i, s := range subjects {
		quoted[i] = strconv.Quote(s)
	}
	if len(quoted) <= 2 {
		return "[" + strings.Join(quoted, ", ") + "]"
	}
	return "[\n      " + strings.Join(quoted, "\n      ") + "\n    ]"
}

// WriteUserCreds writes a NATS credentials file (a user JWT and its nkey
// seed, mode 0600) for a new user of role, with Permissions(role), signed
// by the account whose seed accountSeed holds: for a server in operator
// mode. An existing file is never overwritten.
func WriteUserCreds(role Role, accountSeed []byte, path string) error {
	perms, err := Permissions(role)
	if err != nil {
		return err
	}
	account, err := nkeys.FromSeed(accountSeed)
	if err != nil {
		return fmt.Errorf("the account seed: %w", err)
	}
	if pub, _ := account.PublicKey(); !nkeys.IsValidPublicAccountKey(pub) {
		return errors.New("the account seed is not an account's (its public key starts with A)")
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		return err
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	uc := jwt.NewUserClaims(pub)
	uc.Name = "flowrun-" + string(role)
	uc.Permissions = perms
	token, err := uc.Encode(account)
	if err != nil {
		return fmt.Errorf("signing the user JWT: %w", err)
	}
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("writing the credentials: %w", err)
	}
	_, err = f.Write(creds)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
