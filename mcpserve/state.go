package mcpserve

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/flowrun/flowrun/runtime"
)

// requestStateLifetime is how long a person has to answer a question
// flowrun mcp serve asked before its request state expires; the run
// keeps waiting after that, for flowrun resume.
const requestStateLifetime = time.Hour

// requestStates issues and checks the request states of one flowrun mcp
// serve process. A state is signed with a key that lives only in this
// process, names the session it was issued to, expires, and is accepted
// once: its nonce is remembered until it expires. A restart forgets the
// nonces with the key, so every earlier state is refused then.
type requestStates struct {
	key []byte

	mu   sync.Mutex
	used map[string]time.Time // nonce -> when its state expires
}

func newRequestStates() *requestStates {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &requestStates{key: key, used: map[string]time.Time{}}
}

// waitingState is what a request state carries: the run and its
// question, and what makes the state single-use and short-lived.
type waitingState struct {
	Run      string           `json:"run"`
	Question runtime.Question `json:"question"`
	Session  string           `json:"session"`
	Nonce    string           `json:"nonce"`
	Expires  time.Time        `json:"expires"`
}

// seal signs a state for the question q of run, asked in session.
func (rs *requestStates) seal(run string, q runtime.Question, session string) string {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	b, _ := json.Marshal(waitingState{Run: run, Question: q, Session: session,
		Nonce: hex.EncodeToString(nonce), Expires: time.Now().Add(requestStateLifetime).UTC()})
	body := base64.RawURLEncoding.EncodeToString(b)
	return body + "." + rs.mac(body)
}

func (rs *requestStates) mac(body string) string {
	h := hmac.New(sha256.New, rs.key)
	h.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// open checks a state sent in session at now and uses it up.
func (rs *requestStates) open(state, session string, now time.Time) (waitingState, error) {
	var w waitingState
	body, sig, ok := strings.Cut(state, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(rs.mac(body))) {
		return w, errors.New("the request state was not issued by this server (or the server has restarted since): call the tool again without it")
	}
	b, err := base64.RawURLEncoding.DecodeString(body)
	if err == nil {
		err = json.Unmarshal(b, &w)
	}
	if err != nil {
		return w, fmt.Errorf("reading the request state: %w", err)
	}
	waits := fmt.Sprintf("run %s waits: %s", w.Run, AnswerCommand(w.Run, &w.Question))
	switch {
	case w.Session != session:
		return w, fmt.Errorf("the request state was issued to another session; %s", waits)
	case !now.Before(w.Expires):
		return w, fmt.Errorf("the request state expired at %s; %s", w.Expires.Format(time.RFC3339), waits)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for nonce, expires := range rs.used {
		if !now.Before(expires) {
			delete(rs.used, nonce)
		}
	}
	if _, used := rs.used[w.Nonce]; used {
		return w, fmt.Errorf("the request state was already used: each answers its question once (flowrun show %s tells how run %s stands)", w.Run, w.Run)
	}
	rs.used[w.Nonce] = w.Expires
	return w, nil
}
