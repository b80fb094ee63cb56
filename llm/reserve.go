package llm

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // image.DecodeConfig reads the sizes of the images a call sends
	_ "image/jpeg"
	_ "image/png"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"

	"github.com/flowrun/flowrun/budget"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llmconf"
	"github.com/tiktoken-go/tokenizer"
)

// Bound is the most one model turn may cost: the tokens it may be billed
// for and their price.
type Bound struct {
	InputTokens int
	// OutputTokens is the call's max_tokens, which bounds its reasoning
	// tokens too; 0 when the call sets none (see ErrNoMaxTokens).
	OutputTokens int
	USD          float64
}

// ErrNoMaxTokens is returned by WorstCase, with the input's Bound, for a
// call that sets no max_tokens: its output, and so its cost, has no bound.
var ErrNoMaxTokens = errors.New("the call sets no max_tokens, so its output has no bound")

// NoPriceError is returned by WorstCase for a model that has no price: a
// cost cap cannot bound its calls.
type NoPriceError struct{ Name, Model string }

func (e *NoPriceError) Error() string {
	return fmt.Sprintf("model %s (%s) has no price, so a cost cap cannot hold for its calls: give it a price: {input_per_mtok, output_per_mtok}", e.Name, e.Model)
}

// Unpriced are the models, by name, that have no price (built in or
// price:): a cost cap cannot bound their calls.
func Unpriced(models map[string]*llmconf.Model) []*NoPriceError {
	var out []*NoPriceError
	for _, name := range slices.Sorted(maps.Keys(models)) {
		m := models[name]
		if _, ok := PriceOf(m, m.Model); !ok {
			out = append(out, &NoPriceError{Name: name, Model: m.Model})
		}
	}
	return out
}

// WorstCase is the most req's first turn may cost. Input tokens are
// bounded by the model's tokenizer where it is known (the OpenAI model
// families), else by the UTF-8 length of the text (a byte-level BPE token
// covers at least one byte), plus each message's framing; tools and the
// output schema by the length of their JSON plus a margin; images by
// OpenAI's documented token cost for their size (the largest for detail
// auto when the size cannot be read). Output tokens are the call's
// max_tokens. Everything is priced at the full input and output rates.
func WorstCase(req *Request) (Bound, error) {
	var schema map[string]any
	if req.OutputSchema != nil {
		schema = strictSchema(req.OutputSchema)
	}
	cl, err := newCall(req, req.Messages, schema)
	if err != nil {
		return Bound{}, err
	}
	p, ok := PriceOf(req.Model, cl.Model)
	if !ok {
		return Bound{}, &NoPriceError{Name: req.Model.Name, Model: cl.Model}
	}
	return worstCase(cl, p, true)
}

// worstCase is WorstCase of cl; counted says whether text is counted
// with a known model's tokenizer, else by its bytes, which is quicker (a
// tokenizer takes milliseconds on a long prompt) and bounds it too.
func worstCase(cl *call, p llmconf.Price, counted bool) (Bound, error) {
	b := Bound{InputTokens: inputBound(cl, counted), OutputTokens: cl.MaxTokens}
	b.USD = (float64(b.InputTokens)*p.InputPerMTok + float64(b.OutputTokens)*p.OutputPerMTok) / 1e6
	if cl.MaxTokens <= 0 && p.OutputPerMTok > 0 {
		return b, ErrNoMaxTokens
	}
	return b, nil
}

// Framing beyond the content, in tokens: OpenAI's chat format adds 3 a
// message and 3 to prime the reply; other servers' chat templates are
// allowed more. A tool or schema is allowed jsonMargin beyond its JSON.
const (
	unknownPerMessage = 16
	unknownPerReply   = 32
	jsonMargin        = 32
)

// inputBound bounds the tokens a server may count for what cl sends.
func inputBound(cl *call, counted bool) int {
	enc, known := knownEncoding(cl.Model)
	count := func(s string) int { return len(s) }
	perMessage, perReply := unknownPerMessage, unknownPerReply
	if known && counted {
		if codec, err := codecs[enc](); err == nil {
			count = func(s string) int {
				n, err := codec.Count(s)
				if err != nil {
					return len(s)
				}
				return n
			}
			perMessage, perReply = tokensPerMessage, tokensReplyPrime
		}
	}
	n := perReply
	for _, m := range cl.Messages {
		n += perMessage + count(m.Role) + count(m.Text)
		for _, tc := range m.ToolCalls {
			n += jsonMargin + len(tc.ID) + len(tc.Name) + len(tc.Arguments)
		}
		n += len(m.ToolCallID)
		for _, img := range m.Images {
			n += imageTokens(cl.Model, img)
		}
	}
	for _, t := range cl.Tools {
		raw, _ := json.Marshal(t)
		n += jsonMargin + len(raw)
	}
	if cl.OutputSchema != nil {
		raw, _ := json.Marshal(cl.OutputSchema)
		n += jsonMargin + len(raw) + len(cl.SchemaName)
	}
	return n
}

// knownEncoding is the tokenizer of an OpenAI model family; ok is false
// for any other model, whose server's tokenizer is unknown.
func knownEncoding(model string) (enc tokenizer.Encoding, ok bool) {
	e := encodingFor(model)
	if e != tokenizer.Cl100kBase {
		return e, true
	}
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	return e, strings.HasPrefix(m, "gpt-4") || strings.HasPrefix(m, "gpt-3.5")
}

// imageCost is how OpenAI documents an image's tokens for a model family
// (https://platform.openai.com/docs/guides/images-vision, "Calculating
// costs"): base plus tile tokens per 512px tile of the image scaled to fit
// 2048px and then to 768px on its short side; or, when patch is set,
// 32px patches (at most 1536) times patch.
type imageCost struct {
	base, tile int
	patch      float64
}

var imageCosts = []struct {
	prefix string
	cost   imageCost
}{
	{"gpt-4o-mini", imageCost{base: 2833, tile: 5667}},
	{"gpt-4.1-mini", imageCost{patch: 1.62}},
	{"gpt-4.1-nano", imageCost{patch: 2.46}},
	{"gpt-5-mini", imageCost{patch: 1.62}},
	{"gpt-5-nano", imageCost{patch: 2.46}},
	{"o4-mini", imageCost{patch: 1.72}},
	{"gpt-5", imageCost{base: 70, tile: 140}},
	{"o1", imageCost{base: 75, tile: 150}},
	{"o3", imageCost{base: 75, tile: 150}},
}

// standardImage is the cost of gpt-4o, gpt-4.1 and gpt-4.5, taken for
// every model the table does not name.
var standardImage = imageCost{base: 85, tile: 170}

const maxPatches = 1536

// imageTokens bounds the tokens of one image at detail auto (which may
// be high): by its size when a data URL's header gives it, else the most
// the formula allows.
func imageTokens(model, url string) int {
	c := standardImage
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	for _, e := range imageCosts {
		if strings.HasPrefix(m, e.prefix) {
			c = e.cost
			break
		}
	}
	w, h, ok := imageSize(url)
	if c.patch > 0 {
		patches := maxPatches
		if ok {
			patches = min(patches, ceilDiv(w, 32)*ceilDiv(h, 32))
		}
		return int(math.Ceil(float64(patches) * c.patch))
	}
	tiles := 2 * 4 // 768 x 2048, the largest a high-detail image is scaled to
	if ok {
		tiles = highDetailTiles(w, h)
	}
	return c.base + c.tile*tiles
}

// highDetailTiles are the 512px tiles of a w x h image at detail high.
func highDetailTiles(w, h int) int {
	fw, fh := float64(w), float64(h)
	if s := 2048 / max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	if s := 768 / min(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	return ceilDiv(int(math.Ceil(fw)), 512) * ceilDiv(int(math.Ceil(fh)), 512)
}

func ceilDiv(a, b int) int { return (max(a, 1) + b - 1) / b }

// imageSize reads the size of a base64 data URL's PNG, JPEG or GIF from
// its header.
func imageSize(url string) (w, h int, ok bool) {
	rest, found := strings.CutPrefix(url, "data:")
	if !found {
		return 0, 0, false
	}
	_, data, found := strings.Cut(rest, ";base64,")
	if !found {
		return 0, 0, false
	}
	// The header is in the first few kilobytes (a JPEG's may follow its
	// metadata).
	head := data[:min(len(data), 64<<10)]
	head = head[:len(head)/4*4]
	raw, err := base64.StdEncoding.DecodeString(head)
	if err != nil {
		return 0, 0, false
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, false
	}
	return cfg.Width, cfg.Height, true
}

// maxOutputTokens are the documented output limits of the priced models:
// a call without max_tokens under a cap asks for no more than these.
var maxOutputTokens = map[string]int{
	"gpt-4.1": 32768, "gpt-4.1-mini": 32768, "gpt-4.1-nano": 32768,
	"gpt-4o": 16384, "gpt-4o-mini": 16384,
	"o3": 100000, "o4-mini": 100000,
	"gpt-5": 128000, "gpt-5-mini": 128000, "gpt-5-nano": 128000,
}

// contextWindows are the documented context windows of the priced
// models, in tokens: no request to one of them is billed for more input.
var contextWindows = map[string]int{
	"gpt-4.1": 1047576, "gpt-4.1-mini": 1047576, "gpt-4.1-nano": 1047576,
	"gpt-4o": 128000, "gpt-4o-mini": 128000,
	"o3": 200000, "o4-mini": 200000,
	"gpt-5": 400000, "gpt-5-mini": 400000, "gpt-5-nano": 400000,
}

// ContextWindow is the documented context window of a model, in tokens:
// the bound of a call's input that is not known before it is built.
// ok is false for a model whose window is not documented here.
func ContextWindow(model string) (tokens int, ok bool) {
	tokens, ok = contextWindows[model]
	return tokens, ok
}

// reserve holds the worst case of sending cl against req.Ledger. It
// returns the call to send: cl, or, when cl sets no max_tokens, a copy
// whose max_tokens is what the budget left affords. With no ledger, or a
// model without a price (whose calls the cap cannot bound), nothing is
// held and r is nil.
func (c *Client) reserve(ctx context.Context, req *Request, ep *endpoint, cl *call) (send *call, r budget.Reservation, e *Error) {
	if req.Ledger == nil {
		return cl, nil, nil
	}
	p, ok := PriceOf(req.Model, cl.Model)
	if !ok {
		r, err := req.Ledger.Reserve(ctx, 0, 0)
		if err != nil {
			return nil, nil, c.refused(ctx, ep, cl, err)
		}
		return cl, r, nil
	}
	// The prompt's bytes bound it and cost nothing to count; the
	// tokenizer's tighter count is taken only when they do not fit.
	perToken := p.OutputPerMTok / 1e6
	b, err := worstCase(cl, p, false)
	if _, known := knownEncoding(cl.Model); known {
		if free, ok := budget.Free(req.Ledger); ok && b.USD+perToken > free {
			b, err = worstCase(cl, p, true)
		}
	}
	r, rerr := reserveBound(ctx, req.Ledger, cl, b, err, p)
	if rerr != nil {
		if err != nil {
			rerr = fmt.Errorf("%w; %v: set max_tokens on the node or model so that its calls reserve less than all that is left", rerr, err)
		}
		return nil, nil, c.refused(ctx, ep, cl, rerr)
	}
	if err == nil || math.IsInf(r.USD(), 1) {
		return cl, r, nil
	}
	bounded := *cl
	bounded.MaxTokens = max(1, int(math.Floor((r.USD()-b.USD)/perToken+1e-6)))
	return &bounded, r, nil
}

// reserveBound reserves b, the worst case of cl: for a call without
// max_tokens (err is ErrNoMaxTokens), its input and at least one output
// token, up to all that the cap has left or the model's documented
// output limit.
func reserveBound(ctx context.Context, ledger budget.Ledger, cl *call, b Bound, err error, p llmconf.Price) (budget.Reservation, error) {
	if !errors.Is(err, ErrNoMaxTokens) {
		return ledger.Reserve(ctx, b.USD, b.USD)
	}
	perToken := p.OutputPerMTok / 1e6
	most := math.Inf(1)
	if limit := maxOutputTokens[cl.Model]; limit > 0 {
		most = b.USD + float64(limit)*perToken
	}
	return ledger.Reserve(ctx, b.USD+perToken, most)
}

// refused is the error for a reservation that was not granted.
func (c *Client) refused(ctx context.Context, ep *endpoint, cl *call, err error) *Error {
	if ctx.Err() != nil {
		return c.ended(ctx, ep, cl, &Error{})
	}
	return &Error{class: errclass.Critical, Endpoint: c.where(ep, cl), msg: "reserving the cost of a call to " + c.where(ep, cl) + ": " + err.Error(), err: err}
}

// settle ends a reservation: at the reply's cost, at nothing when the
// server refused the request, else (cancelled, cut off, timed out after
// sending) at what was reserved, since the server may have billed it all.
// It returns what the reservation settled at.
func settle(r budget.Reservation, cost float64, answered bool, e *Error) float64 {
	switch {
	case r == nil:
		return 0
	case answered:
	case e != nil && e.Status >= http.StatusBadRequest:
		cost = 0
	default:
		cost = r.USD()
	}
	r.Settle(cost)
	return cost
}
