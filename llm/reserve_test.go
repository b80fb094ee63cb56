package llm

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/budget"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/llmconf"
)

// capped is a model at $0.01 an output token with free input, whose
// name has no documented output limit: under a cap, a call without
// max_tokens may write all the cap has left.
func capped() *llmconf.Model {
	return &llmconf.Model{Name: "m", Model: "local-model", Price: &llmconf.Price{OutputPerMTok: 10000}}
}

// TestNoMaxTokensGetsWhatTheCapLeaves: a request without max_tokens
// under a cap with $0.50 left is sent with max_tokens 50 (what $0.50
// buys at $0.01 a token); once the cap has less than a token left, the
// call is refused before it is sent, with an error that names
// max_tokens.
func TestNoMaxTokensGetsWhatTheCapLeaves(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		bound, _ := r.Body["max_tokens"].(float64)
		return llmtest.Reply{Text: "ok", Usage: llmtest.Usage{Completion: int(bound)}}
	})
	c := New(Options{Env: srv.Env("sk-test")})
	ledger := budget.New("the cap ($1.00)", 1, 0.5, nil)
	req := Request{Model: capped(), Messages: []Message{{Role: RoleUser, Text: "go"}}, Ledger: ledger}
	resp, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Last().Body["max_tokens"]; got != float64(50) || resp.CostUSD != 0.5 || ledger.Spent() != 1 {
		t.Fatalf("sent max_tokens %v, cost $%v, ledger $%v: want 50 tokens, $0.50, $1 spent", got, resp.CostUSD, ledger.Spent())
	}
	_, err = c.Complete(context.Background(), req)
	var refused *budget.ExceededError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "max_tokens") || srv.Calls() != 1 {
		t.Fatalf("a call with nothing left: %v after %d calls, want refused before sending, naming max_tokens", err, srv.Calls())
	}
}

// TestWorstCaseBounds: the input bound is the tokenizer's count plus
// framing for an OpenAI model, the byte length for any other, images
// cost OpenAI's formula, and a call without max_tokens says so.
func TestWorstCaseBounds(t *testing.T) {
	price := &llmconf.Price{InputPerMTok: 1e6, OutputPerMTok: 2e6}
	text := strings.Repeat("héllo wörld ", 100)
	msgs := []Message{{Role: RoleUser, Text: text}}
	known, err := WorstCase(&Request{Model: &llmconf.Model{Name: "k", Model: "gpt-4.1", Price: price}, Messages: msgs, MaxTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	unknown, err := WorstCase(&Request{Model: &llmconf.Model{Name: "u", Model: "llama-3", Price: price}, Messages: msgs, MaxTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	if known.InputTokens >= len(text) || unknown.InputTokens < len(text) || known.OutputTokens != 10 || known.USD != float64(known.InputTokens)+20 {
		t.Fatalf("bounds %+v (gpt-4.1) and %+v (llama-3) of %d bytes", known, unknown, len(text))
	}
	img := []Message{{Role: RoleUser, Images: []string{"https://example.com/a.png"}}}
	withImage, err := WorstCase(&Request{Model: &llmconf.Model{Name: "k", Model: "gpt-4o", Price: price}, Messages: img, MaxTokens: 1})
	if err != nil || withImage.InputTokens < 85+170*8 {
		t.Fatalf("an image of unknown size: %+v %v, want at least the 1445 tokens of the largest high-detail image", withImage, err)
	}
	if _, err := WorstCase(&Request{Model: &llmconf.Model{Name: "k", Model: "gpt-4.1", Price: price}, Messages: msgs}); !errors.Is(err, ErrNoMaxTokens) {
		t.Fatalf("no max_tokens: %v", err)
	}
	var noPrice *NoPriceError
	if _, err := WorstCase(&Request{Model: &llmconf.Model{Name: "u", Model: "llama-3"}, Messages: msgs}); !errors.As(err, &noPrice) {
		t.Fatalf("no price: %v", err)
	}
}

// BenchmarkWorstCase is what reserving adds to a call under a cap:
// counting the prompt's tokens (a chat of 4 KiB and of 400 KiB).
func BenchmarkWorstCase(b *testing.B) {
	for _, size := range []int{4 << 10, 400 << 10} {
		req := &Request{Model: &llmconf.Model{Name: "k", Model: "gpt-4.1"}, MaxTokens: 100,
			Messages: []Message{{Role: RoleSystem, Text: "You answer."}, {Role: RoleUser, Text: strings.Repeat("The quick brown fox jumps. ", size/27)}}}
		b.Run(map[int]string{4 << 10: "4KiB", 400 << 10: "400KiB"}[size], func(b *testing.B) {
			for b.Loop() {
				if _, err := WorstCase(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReserve is what a call under a cap with room to spare pays:
// the prompt bounded by its bytes, reserved and settled.
func BenchmarkReserve(b *testing.B) {
	for _, size := range []int{4 << 10, 400 << 10} {
		req := &Request{Model: &llmconf.Model{Name: "k", Model: "gpt-4.1"}, MaxTokens: 100, Ledger: budget.New("cap", 1e9, 0, nil),
			Messages: []Message{{Role: RoleSystem, Text: "You answer."}, {Role: RoleUser, Text: strings.Repeat("The quick brown fox jumps. ", size/27)}}}
		cl, err := newCall(req, req.Messages, nil)
		if err != nil {
			b.Fatal(err)
		}
		c := New(Options{})
		b.Run(map[int]string{4 << 10: "4KiB", 400 << 10: "400KiB"}[size], func(b *testing.B) {
			for b.Loop() {
				_, r, err := c.reserve(context.Background(), req, nil, cl)
				if err != nil {
					b.Fatal(err)
				}
				r.Settle(0)
			}
		})
	}
}
