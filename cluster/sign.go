package cluster

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Headers carrying a message's signature: the signer's key id and an
// Ed25519 signature over the message's purpose (its subject and message
// id) and its data.
const (
	keyHeader = "Flowrun-Key"
	sigHeader = "Flowrun-Sig"
)

// Signer signs what a coordinator or worker publishes, with an Ed25519
// key of its own.
type Signer struct {
	key ed25519.PrivateKey
	id  string
}

// Keys are the public keys one side trusts, by key id.
type Keys map[string]ed25519.PublicKey

// keyID names a public key by a prefix of its SHA-256: short enough for a
// log line, long enough that no forger finds another key with its id.
func keyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// GenerateKey writes a new key pair: dir/name.key (the private key, PKCS
// #8 PEM, mode 0600) and dir/name.pub (the public key, PKIX PEM). An
// existing key is never overwritten.
func GenerateKey(dir, name string) (keyPath, pubPath string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generating an Ed25519 key: %w", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", "", fmt.Errorf("encoding the private key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", "", fmt.Errorf("encoding the public key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("making the key directory: %w", err)
	}
	keyPath, pubPath = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	for _, f := range []struct {
		path  string
		block *pem.Block
		mode  os.FileMode
	}{{keyPath, &pem.Block{Type: "PRIVATE KEY", Bytes: privDER}, 0o600}, {pubPath, &pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}, 0o644}} {
		file, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err != nil {
			return "", "", fmt.Errorf("writing the key: %w", err)
		}
		err = pem.Encode(file, f.block)
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", "", fmt.Errorf("writing %s: %w", f.path, err)
		}
	}
	return keyPath, pubPath, nil
}

// LoadSigner reads a private key GenerateKey wrote. A key that others can
// read is refused: anyone who reads it can sign as its owner.
func LoadSigner(path string) (*Signer, error) {
	if err := checkPrivate(path, "signing key"); err != nil {
		return nil, err
	}
	der, err := readPEM(path, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	priv, ok := k.(ed25519.PrivateKey)
	if err != nil || !ok {
		return nil, fmt.Errorf("signing key %s: not an Ed25519 private key", path)
	}
	return &Signer{key: priv, id: keyID(priv.Public().(ed25519.PublicKey))}, nil
}

// OpenFileError says that a private file, a signing key or NATS
// credentials, can be read by others than its owner.
type OpenFileError struct {
	What, Path string
	Mode       os.FileMode
}

func (e *OpenFileError) Error() string {
	return fmt.Sprintf("%s %s: its mode is %04o; make it readable by its owner only (0600)", e.What, e.Path, e.Mode)
}

// checkPrivate refuses a file that group or others may read or write:
// anyone who reads it can act as its owner.
func checkPrivate(path, what string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("reading the %s: %w", what, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return &OpenFileError{What: what, Path: path, Mode: fi.Mode().Perm()}
	}
	return nil
}

// ReadPrivate reads a private file, what it is, refusing one that others
// can read.
func ReadPrivate(path, what string) ([]byte, error) {
	if err := checkPrivate(path, what); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the %s: %w", what, err)
	}
	return bytes.TrimSpace(data), nil
}

// LoadKeys reads the public keys GenerateKey wrote.
func LoadKeys(paths []string) (Keys, error) {
	keys := Keys{}
	for _, path := range paths {
		der, err := readPEM(path, "PUBLIC KEY")
		if err != nil {
			return nil, err
		}
		k, err := x509.ParsePKIXPublicKey(der)
		pub, ok := k.(ed25519.PublicKey)
		if err != nil || !ok {
			return nil, fmt.Errorf("public key %s: not an Ed25519 public key", path)
		}
		keys[keyID(pub)] = pub
	}
	return keys, nil
}

func readPEM(path, kind string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != kind {
		return nil, fmt.Errorf("key %s: not a PEM %s", path, kind)
	}
	return block.Bytes, nil
}

// signed is what is signed: the purpose binds a signature to where the
// data was published (a subject and message id, or a bucket key), so
// that a signed message copied elsewhere does not verify.
func signed(purpose string, data []byte) []byte {
	return append(append([]byte(purpose), 0), data...)
}

func (s *Signer) sign(purpose string, data []byte) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(s.key, signed(purpose, data)))
}

// errUnsigned and errUntrusted say why a message was refused.
var (
	errUnsigned  = errors.New("it is not signed")
	errUntrusted = errors.New("it is signed by a key not trusted here")
	errForged    = errors.New("its signature does not match its content")
)

// verify checks a signature made by sign with one of keys; it returns
// the signer's key id.
func (keys Keys) verify(purpose string, data []byte, id, sig string) (string, error) {
	if id == "" || sig == "" {
		return "", errUnsigned
	}
	pub := keys[id]
	if pub == nil {
		return id, fmt.Errorf("%w (key %s)", errUntrusted, id)
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || !ed25519.Verify(pub, signed(purpose, data), raw) {
		return id, fmt.Errorf("%w (key %s)", errForged, id)
	}
	return id, nil
}

// msgPurpose is what a message's signature covers beside its data.
func msgPurpose(subject, msgID string) string { return subject + "\n" + msgID }

// signMsg makes a message for subject with data, signed when s is set.
func signMsg(s *Signer, subject, msgID string, data []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = data
	m.Header.Set(nats.MsgIdHdr, msgID)
	if s != nil {
		m.Header.Set(keyHeader, s.id)
		m.Header.Set(sigHeader, s.sign(msgPurpose(subject, msgID), data))
	}
	return m
}

// trust is what one side accepts: messages signed by keys, or, when
// insecure, anything.
type trust struct {
	keys     Keys
	insecure bool
}

// msg checks a stored or delivered message's signature and returns its
// signer's key id.
func (t trust) msg(subject string, h nats.Header, data []byte) (string, error) {
	if t.insecure {
		return h.Get(keyHeader), nil
	}
	return t.keys.verify(msgPurpose(subject, h.Get(nats.MsgIdHdr)), data, h.Get(keyHeader), h.Get(sigHeader))
}

// envelope is a signed value in a key-value bucket, whose entries carry
// no headers.
type envelope struct {
	Key  string          `json:"key,omitempty"`
	Sig  string          `json:"sig,omitempty"`
	Body json.RawMessage `json:"body"`
}

// seal wraps a bucket value, signed for bucket key when s is set.
func seal(s *Signer, bucket, key string, body []byte) ([]byte, error) {
	e := envelope{Body: body}
	if s != nil {
		e.Key, e.Sig = s.id, s.sign(bucket+"/"+key, body)
	}
	return json.Marshal(e)
}

// open unwraps a bucket value and returns its signer's key id.
func (t trust) open(bucket, key string, value []byte) (body []byte, signer string, err error) {
	var e envelope
	if err := json.Unmarshal(value, &e); err != nil || e.Body == nil {
		return nil, "", fmt.Errorf("%w: not a flowrun value", errUnsigned)
	}
	if t.insecure {
		return e.Body, e.Key, nil
	}
	signer, err = t.keys.verify(bucket+"/"+key, e.Body, e.Key, e.Sig)
	return e.Body, signer, err
}

// refusals reports the messages a process refused: a line each for the
// first few of a kind, then one saying the rest are only counted, so that
// a flood of forgeries cannot flood the log.
type refusals struct {
	log func(line string)
	mu  sync.Mutex
	n   map[string]int
}

const reportedRefusals = 5

func (r *refusals) report(kind, line string) {
	if r == nil || r.log == nil {
		return
	}
	r.mu.Lock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[kind]++
	n := r.n[kind]
	r.mu.Unlock()
	switch {
	case n <= reportedRefusals:
		r.log(line)
	case n == reportedRefusals+1:
		r.log(fmt.Sprintf("more %s refused; no longer reported one by one", kind))
	}
}

// KeyFiles name the files that say how a coordinator or a worker reaches
// NATS and whom it trusts.
type KeyFiles struct {
	Creds string // see Options.Creds
	CA    string // see Options.CA
	// Sign is this process's private key: a coordinator signs its jobs
	// with it, a worker what it publishes.
	Sign string
	// Trust are the coordinators' public keys, whose jobs a worker runs.
	Trust []string
	// TrustWorker are the workers' public keys, whose checkpoints, events
	// and results are accepted.
	TrustWorker []string
	Insecure    bool // see Options.Insecure
}

// MissingKeysError says that a process that is not insecure lacks the
// keys to sign what it publishes and check what it receives.
type MissingKeysError struct {
	Worker bool
	// NoTrust: a worker trusts no coordinator key, so would run no job.
	NoTrust bool
}

func (e *MissingKeysError) Error() string {
	switch {
	case e.NoTrust:
		return "a worker runs only jobs signed by a coordinator it trusts, and no coordinator key is trusted"
	case e.Worker:
		return "a worker signs what it publishes, and no signing key is given"
	}
	return "a coordinator signs its jobs and accepts only results signed by a trusted worker, and its signing key or the workers' keys are missing"
}

// Options are the cluster options that reach url with the files k names,
// for a worker or for a coordinator, with the keys read. Unless k is
// Insecure, a worker needs a coordinator key to trust and its own key to
// sign with, and a coordinator its key and the workers' keys: a
// *MissingKeysError says which is missing.
func (k KeyFiles) Options(url string, worker bool) (Options, error) {
	o := Options{URL: url, Creds: k.Creds, CA: k.CA, Insecure: k.Insecure}
	if !k.Insecure {
		switch {
		case worker && len(k.Trust) == 0:
			return o, &MissingKeysError{Worker: true, NoTrust: true}
		case k.Sign == "" || len(k.TrustWorker) == 0 && !worker:
			return o, &MissingKeysError{Worker: worker}
		}
	}
	var err error
	if k.Creds != "" {
		err = checkPrivate(k.Creds, "NATS credentials")
	}
	if k.Sign != "" && err == nil {
		o.Signer, err = LoadSigner(k.Sign)
	}
	if err == nil {
		o.Workers, err = LoadKeys(k.TrustWorker)
	}
	if err == nil {
		o.Coordinators, err = LoadKeys(k.Trust)
	}
	return o, err
}

// jobTTL is how long a job or a stop is valid after its coordinator
// issued it: long enough for an item to wait its turn in a large batch's
// queue. An expired job is refused; batch resume queues its item again.
const jobTTL = 7 * 24 * time.Hour

// clockSkew is how far a coordinator's clock may run ahead of a worker's.
const clockSkew = 5 * time.Minute

// Ticket binds a signed job or stop to its batch session: the coordinator
// that issued it, when, until when it holds, and a nonce that workers
// record when they take a job, so that a copy replayed later is refused.
type Ticket struct {
	Session string    `json:"session"`
	Issued  time.Time `json:"issued"`
	Expires time.Time `json:"expires"`
	Nonce   string    `json:"nonce"`
}

func newTicket(session string, now time.Time) Ticket {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return Ticket{Session: session, Issued: now.UTC(), Expires: now.Add(jobTTL).UTC(), Nonce: hex.EncodeToString(b[:])}
}

var nonceHex = regexp.MustCompile(`^[0-9a-f]{32}$`)

var errExpired = errors.New("it has expired")

// check refuses a ticket that is not valid at now: without a session or
// nonce, issued in the future or for longer than jobTTL, or expired.
func (t Ticket) check(now time.Time) error {
	switch {
	case t.Session == "" || strings.ContainsAny(t.Session, ".*> ") || !nonceHex.MatchString(t.Nonce):
		return errors.New("it names no batch session or nonce")
	case t.Issued.After(now.Add(clockSkew)) || t.Expires.Sub(t.Issued) > jobTTL:
		return fmt.Errorf("it was issued at %s, valid until %s: not a time this worker accepts", t.Issued.Format(time.RFC3339), t.Expires.Format(time.RFC3339))
	case !now.Before(t.Expires):
		return fmt.Errorf("%w (at %s)", errExpired, t.Expires.Format(time.RFC3339))
	}
	return nil
}
