package llm

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/flowrun/flowrun/llmconf"
	"github.com/flowrun/flowrun/redact"
)

// DefaultBaseURL is where requests go when neither the model's base_url
// nor OPENAI_BASE_URL says otherwise.
const DefaultBaseURL = "https://api.openai.com/v1"

// Endpoint describes where a model's requests go. It never holds the key.
type Endpoint struct {
	// URL is the base URL with credentials removed, e.g. http://host/v1.
	URL string
	// URLFrom says where URL came from: "base_url", "OPENAI_BASE_URL" or
	// "default".
	URLFrom string
	// KeyEnv is the variable the key is read from, "" when none is used:
	// a model whose base_url is not OpenAI's gets OPENAI_API_KEY only by
	// naming it in api_key_env. HasKey says whether the key is set.
	KeyEnv string
	HasKey bool
}

// endpoint is a resolved Endpoint with its key and openai-go services.
type endpoint struct {
	Endpoint
	base    string // as given to openai-go
	display string // URL without a trailing slash, for messages
	key     string
	// maxCompletionTokens: OpenAI itself wants max_completion_tokens;
	// compatible servers know max_tokens.
	maxCompletionTokens bool
	limit               replyLimit
	chat                openai.ChatCompletionService
	responses           responses.ResponseService
}

// ResolveEndpoint tells where m's requests would go, and whether a key is
// set, given an environment lookup such as os.LookupEnv.
func ResolveEndpoint(m *llmconf.Model, env func(string) (string, bool)) Endpoint {
	ep, _ := resolve(m, env)
	return ep
}

func resolve(m *llmconf.Model, env func(string) (string, bool)) (Endpoint, string) {
	if m.Offline() {
		return offlineEndpoint(m), ""
	}
	look := func(name string) string {
		if v, ok := env(name); ok {
			return strings.TrimSpace(v)
		}
		return ""
	}
	var ep Endpoint
	switch {
	case m.BaseURL != "":
		ep.URL, ep.URLFrom = m.BaseURL, "base_url"
	case look("OPENAI_BASE_URL") != "":
		ep.URL, ep.URLFrom = look("OPENAI_BASE_URL"), "OPENAI_BASE_URL"
	default:
		ep.URL, ep.URLFrom = DefaultBaseURL, "default"
	}
	ep.URL = strings.TrimRight(ep.URL, "/")
	u, err := url.Parse(ep.URL)
	if err == nil {
		ep.URL = u.Redacted()
	}
	switch {
	case m.APIKeyEnv != "":
		ep.KeyEnv = m.APIKeyEnv
	case ep.URLFrom == "base_url" && (err != nil || u.Hostname() != "api.openai.com"):
		// A pipeline file that points a model elsewhere does not get the
		// user's OpenAI key unless it names a variable with api_key_env.
		ep.KeyEnv = ""
	default:
		ep.KeyEnv = "OPENAI_API_KEY"
	}
	key := ""
	if ep.KeyEnv != "" {
		key = look(ep.KeyEnv)
	}
	ep.HasKey = key != ""
	return ep, key
}

// Secrets are the secrets m's requests carry, read through env: its API
// key and any password in its base URL.
func Secrets(m *llmconf.Model, env func(string) (string, bool)) []string {
	_, key := resolve(m, env)
	out := []string{key}
	base, _ := env("OPENAI_BASE_URL")
	for _, raw := range []string{m.BaseURL, base} {
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil {
			if pw, ok := u.User.Password(); ok {
				out = append(out, pw)
			}
		}
	}
	return out
}

// endpointFor resolves m's endpoint and returns the cached openai-go
// services for it. Errors are critical: bad configuration.
func (c *Client) endpointFor(m *llmconf.Model) (*endpoint, error) {
	pub, key := resolve(m, c.env)
	if m.Offline() {
		return &endpoint{Endpoint: pub, base: pub.URL, display: pub.URL}, nil
	}
	raw := pub.URL
	switch pub.URLFrom {
	case "base_url":
		raw = strings.TrimRight(m.BaseURL, "/")
	case "OPENAI_BASE_URL":
		v, _ := c.env("OPENAI_BASE_URL")
		raw = strings.TrimRight(strings.TrimSpace(v), "/")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, criticalf("model %q: %s %q is not an http(s) URL; fix %s", m.Name, pub.URLFrom, pub.URL, urlSetting(m, pub))
	}
	if key == "" {
		if m.APIKeyEnv != "" {
			return nil, criticalf("model %q: api_key_env names %s, which is not set; export it or remove api_key_env for a server that needs no key", m.Name, m.APIKeyEnv)
		}
		if pub.URLFrom == "default" {
			return nil, criticalf("model %q: no API key for %s: set OPENAI_API_KEY, or set OPENAI_BASE_URL (or the model's base_url) to a server that needs no key", m.Name, DefaultBaseURL)
		}
	}
	// Whatever goes wrong from here on may echo these.
	redact.Add(Secrets(m, c.env)...)
	// The services bound replies to the model's limit, naming the model:
	// models share them only if they share both. The id is built in a
	// buffer so that finding the services allocates nothing.
	limit := limitOf(m)
	var buf [256]byte
	id := append(buf[:0], raw...)
	for _, part := range []string{pub.KeyEnv, key, limit.model} {
		id = append(append(id, 0), part...)
	}
	id = strconv.AppendInt(append(id, 0), int64(limit.max), 10)
	c.mu.Lock()
	defer c.mu.Unlock()
	if ep, ok := c.endpoints[string(id)]; ok {
		return ep, nil
	}
	opts := []option.RequestOption{
		option.WithBaseURL(raw + "/"),
		option.WithHTTPClient(c.http),
		option.WithMaxRetries(0),
		option.WithMiddleware(limit.middleware),
	}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	ep := &endpoint{
		Endpoint:            pub,
		base:                raw,
		display:             pub.URL,
		key:                 key,
		maxCompletionTokens: u.Host == "api.openai.com",
		limit:               limit,
		chat:                openai.NewChatCompletionService(opts...),
		responses:           responses.NewResponseService(opts...),
	}
	c.endpoints[string(id)] = ep
	return ep, nil
}

func urlSetting(m *llmconf.Model, ep Endpoint) string {
	if ep.URLFrom == "base_url" {
		return "base_url of model " + m.Name
	}
	return ep.URLFrom
}

// keyHint is the fix for a 401.
func (ep *endpoint) keyHint() string {
	switch {
	case ep.KeyEnv == "":
		return "the model's api_key_env (no key was sent: a model with its own base_url gets one only from the variable api_key_env names)"
	case ep.key == "":
		return ep.KeyEnv + " (no key was sent; the server wants one)"
	}
	return ep.KeyEnv
}

// urlHint names the setting that chose the URL, for a 404.
func (ep *endpoint) urlHint() string {
	switch ep.URLFrom {
	case "base_url":
		return "the model's base_url"
	case "OPENAI_BASE_URL":
		return "OPENAI_BASE_URL"
	}
	return "OPENAI_BASE_URL is not set, so " + DefaultBaseURL + " was used"
}

func defaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 512
	t.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: t}
}
