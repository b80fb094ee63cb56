package batch

import (
	"encoding/json"
	"fmt"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/store"
)

// Settings are the options a batch started with, kept with the batch so
// that a resumed batch runs as it began: the same cost cap, concurrency,
// scoring, models and dataset. They are stored as this struct's JSON; the
// field names are those of the untyped map older batches stored, so their
// rows decode into it unchanged.
type Settings struct {
	// Concurrency is the items run at once; with NATS, the items queued or
	// running on the workers, 0 for no cap.
	Concurrency int     `json:"concurrency"`
	MaxCostUSD  float64 `json:"max_cost_usd"`
	MaxLoops    int     `json:"max_loops"`
	Auto        bool    `json:"auto"`

	// Repeat is how many runs each item has (0: one); a resume keeps it,
	// since the items' rows were all made when the batch began.
	Repeat int `json:"repeat,omitempty"`

	Limit  int    `json:"limit"`
	Sample int    `json:"sample"`
	Seed   uint64 `json:"seed"`
	Filter string `json:"filter"`

	Map     map[string]string `json:"map,omitempty"` // --map input=field
	Metrics []string          `json:"metrics"`       // in declaration order
	Primary string            `json:"primary"`
	// Expected are the dataset fields the metrics read: what the views
	// show beside an item's outputs.
	Expected []string `json:"expected"`
	// Expects are, by metric, the outputs it compares with a dataset
	// field (outputs.X == item.Y): what an item that failed was expected
	// to give.
	Expects map[string][]dsl.Expectation `json:"expects,omitempty"`
	Score   []string                     `json:"score,omitempty"` // --score NAME=EXPR
	Model   []string                     `json:"model,omitempty"` // --model NAME=MODEL
	Replay  string                       `json:"replay,omitempty"`

	DatasetAbs string `json:"dataset_abs"`
	NATS       string `json:"nats,omitempty"` // the NATS server's URL, credentials removed

	// How a --nats batch reaches the server and whom it trusts: paths of
	// files, never a key or a credential itself.
	NATSCreds       string   `json:"nats_creds,omitempty"`
	NATSCA          string   `json:"nats_ca,omitempty"`
	NATSSign        string   `json:"nats_sign,omitempty"`
	NATSTrustWorker []string `json:"nats_trust_worker,omitempty"`
	NATSInsecure    bool     `json:"nats_insecure,omitempty"`
}

// SetSettings records s as b's settings.
func SetSettings(b *store.Batch, s Settings) error {
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("batch %s: encoding its settings: %w", b.ID, err)
	}
	b.Settings = data
	return nil
}

// SettingsOf reads the settings b started with.
func SettingsOf(b *store.Batch) (Settings, error) {
	var s Settings
	if len(b.Settings) == 0 {
		return s, nil
	}
	if err := json.Unmarshal(b.Settings, &s); err != nil {
		return Settings{}, fmt.Errorf("batch %s: reading its settings: %w", b.ID, err)
	}
	return s, nil
}
