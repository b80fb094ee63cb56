// Package llm is flowrun's provider layer: it sends one model Request to an
// OpenAI-compatible endpoint through github.com/openai/openai-go and returns
// one Response.
//
// What it guarantees to the nodes that call it:
//
//   - One shape for both wire APIs. A Request goes out as Chat Completions,
//     or as the Responses API when its model says api: responses; the
//     Response looks the same either way, streamed or not.
//   - Structured output is validated. With an OutputSchema the reply is
//     parsed and checked against it (JSON Schema 2020-12); an invalid reply
//     is sent back with its validation errors up to RepairRetries times, and
//     then fails with class invalid_output.
//   - Every failure is classed. Errors implement Class() string with one of
//     rate_limit, server, timeout, connection, invalid_output or critical
//     (the runtime's class names). An error a server reports with a 200
//     (inside a stream, or as a reply's body) is classed by its code or
//     type as the HTTP status it stands for would be: invalid_api_key as a
//     401, insufficient_quota as critical even on a 429, rate_limit_exceeded
//     as a 429. Recoverable classes are retried here, and only here, under
//     one policy (client defaults, the model's retry:, the node's retry:)
//     with exponential backoff and jitter, honouring Retry-After and
//     retry-after-ms; openai-go's own retries are off so each attempt is
//     visible to Request.Observe. Critical errors name the endpoint and the
//     fix.
//   - Rate limits (rpm, tpm, max_concurrency) hold across every caller of
//     one Client, keyed by endpoint and model.
//   - Usage and cost come with every Response, priced from a built-in table
//     or the model's price override. A server that reports no usage has
//     its tokens counted locally (Usage.Estimated), so costs and cost
//     limits hold.
//   - A request is streamed or plain as the model's stream setting says
//     (Streams); the Response is the same either way.
//   - With a ReplyCache (Options.Cache), a request whose cache setting
//     allows it (temperature 0, or cache: always) and whose canonical
//     hash and endpoint match a stored reply is answered with no network,
//     no usage and no cost, and is reported as Cached; identical requests
//     in flight at once send one. Cassette recording and replay bypass it.
//   - A model with background: true (Responses API) makes each call a
//     background response, polled until it ends. Its id is kept through
//     Request.InFlight before the first poll, so that the call made again
//     (a resumed run, any machine) re-attaches to it instead of creating
//     another; a call whose context ends cancels it on the server; a
//     response that fails is classed like any reply and retried as a new
//     one; a broken stream resumes after the last event received, and a
//     new process after the last position recorded (every 5s at most).
//   - Every body from an endpoint is read through one bounded reader, up
//     to the model's max_reply_bytes (llmconf.DefaultMaxReplyBytes) and,
//     in a stream, 16 MiB a line: a longer reply fails with class server,
//     sent once (sending it again would pay again).
//   - A Cassette records exchanges into readable YAML and replays them with
//     no network; a replay miss names the node and what differed.
//   - An API key never appears, whole or in part, in an error, an observed
//     exchange or a cassette: the key (and any password in the base URL)
//     is registered with package redact, and server text is redacted
//     before it is shortened.
//
// The environment (OPENAI_API_KEY, OPENAI_BASE_URL, api_key_env) is read
// through Options.Env, never from the process directly, so tests control it.
package llm
