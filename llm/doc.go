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
//   - Every failure is classed. Errors implement Class() errclass.Class
//     with one of rate_limit, server, timeout, connection, invalid_output
//     or critical, as the runtime routes them. Recoverable classes are retried here with
//     exponential backoff and jitter, honouring Retry-After and
//     retry-after-ms; openai-go's own retries are off so each attempt is
//     visible to Request.Observe. Critical errors name the endpoint and the
//     fix.
//   - Rate limits (rpm, tpm, max_concurrency) hold across every caller of
//     one Client, keyed by endpoint and model.
//   - Usage and cost come with every Response, priced from a built-in table
//     or the model's price override.
//   - A Cassette records exchanges into readable YAML and replays them with
//     no network; a replay miss names the node and what differed.
//   - An API key never appears in an error, an observed exchange or a
//     cassette.
//
// The environment (OPENAI_API_KEY, OPENAI_BASE_URL, api_key_env) is read
// through Options.Env, never from the process directly, so tests control it.
package llm
