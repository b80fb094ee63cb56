package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// followExpiry bounds each pull of a follower: a consumer that misses two
// heartbeats (half the expiry each) is made again, so a lost server
// stalls it for about this long.
var followExpiry = jetstream.PullExpiry(2 * time.Second)

// bucketFollower reads the keys of a key-value bucket as they change,
// from the bucket's stream through an ordered pull consumer rather than
// a key-value watch: a watch whose consumer's server is lost notices only
// after 10 s of silence, and its first attempt to start again may fail
// while the cluster elects, which costs 10 s more.
type bucketFollower struct {
	msgs   jetstream.MessagesContext
	prefix string
	// ready is closed once the values present when following began have
	// been read.
	ready chan struct{}
}

// followBucket follows the keys of bucket matching keys (a subject
// filter such as "b1.*" or ">"), starting with the latest value of each,
// until ctx ends.
func followBucket(ctx context.Context, js jetstream.JetStream, bucket, keys string) (*bucketFollower, error) {
	f := &bucketFollower{prefix: "$KV." + bucket + ".", ready: make(chan struct{})}
	cons, err := js.OrderedConsumer(ctx, "KV_"+bucket, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{f.prefix + keys}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy})
	if err == nil {
		f.msgs, err = cons.Messages(followExpiry)
	}
	if err != nil {
		return nil, fmt.Errorf("following %s in the key-value bucket %s: %w", keys, bucket, err)
	}
	info := cons.CachedInfo()
	if info == nil {
		if info, err = cons.Info(ctx); err != nil {
			f.msgs.Stop()
			return nil, fmt.Errorf("following %s in the key-value bucket %s: %w", keys, bucket, err)
		}
	}
	if info.NumPending == 0 {
		close(f.ready)
	}
	context.AfterFunc(ctx, f.msgs.Stop)
	return f, nil
}

// next is the next key written, with its value (nil once deleted or
// purged); it fails once the follower is stopped.
func (f *bucketFollower) next() (key string, value []byte, err error) {
	msg, err := f.msgs.Next()
	if err != nil {
		return "", nil, err
	}
	if md, err := msg.Metadata(); err == nil && md.NumPending == 0 {
		select {
		case <-f.ready:
		default:
			close(f.ready)
		}
	}
	key = strings.TrimPrefix(msg.Subject(), f.prefix)
	if msg.Headers().Get("KV-Operation") != "" {
		return key, nil, nil
	}
	return key, append([]byte{}, msg.Data()...), nil // not nil, even if empty
}
