// Package cluster spreads a batch's items over worker processes through
// NATS JetStream, with JetStream as the shared, durable run state.
//
// Guarantees:
//   - Every item is one message on a work-queue stream; a coordinator
//     publishes no item whose message is still there, and its retried
//     publishes are deduplicated by message id, so an item is queued once.
//   - A worker keeps an item's message in progress while it runs it; a
//     worker that dies (or stops) lets the message be redelivered, and the
//     next worker resumes the item's run from the checkpoints the dead one
//     stored in JetStream: a node whose checkpoint was stored, and so every
//     finished model turn, is never run again.
//   - A checkpoint that follows an external effect (see
//     runtime.Checkpoint.Pure) is acknowledged by JetStream before the run
//     goes on, exactly as the SQLite store makes it durable.
//   - Each item has exactly one result per worker key: it is created under
//     the item's key and the worker's key id in a key-value bucket, and a
//     second attempt to create it is refused and ignored; the coordinator
//     takes the first.
//   - A halted batch (Coordinator.Halt) queues nothing more, its queued
//     items are dropped by the workers that take them, and its running
//     items stop at their next node on every worker, with their
//     checkpoints stored and no result recorded, so that the batch
//     resumes (under a new session, which the stop does not hold) as if
//     stopped locally.
//   - A coordinator's store holds each running item's run and its events
//     as they come, and the whole run once it ends.
//   - Pipeline files travel by content hash through an object store, so
//     workers need no shared filesystem; model endpoints and API keys come
//     from each worker's own environment and never pass through NATS (a
//     worker replaces its endpoints in what it publishes). A pipeline
//     reads no variable of a worker's environment, and sends a key to no
//     other endpoint, unless the worker's operator allowed it.
//   - Unless Options.Insecure: a worker runs only jobs a trusted
//     coordinator key signed (the job names every file by hash) and obeys
//     only its stops; a coordinator takes only results, events and
//     checkpoints a trusted worker key signed, and a worker restores only
//     such checkpoints. Each signature covers where the value was
//     published, so a copy elsewhere does not verify. Jobs and stops carry
//     their batch session, issue time, expiry and nonce (Ticket), and a
//     worker records each job's nonce as it takes it, once and for good,
//     so a replayed job is refused. What is refused is reported and
//     ignored.
//   - Setup, with an admin credential, makes every stream and bucket with
//     its limits; Permissions(role) are the least each role needs, so that
//     on a server that gives them the server itself refuses the rest:
//     neither a coordinator nor a worker can create, update, purge or
//     delete a stream or the workers' consumer, or delete a message.
//   - A job's names cannot lead a worker's writes or reads out of its
//     cache directory; a pipeline that starts a local process fails unless
//     the worker's operator allowed it, and so does a job whose input
//     names a path on the worker's host, always.
package cluster
