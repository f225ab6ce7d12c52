package store

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// Group commit. Every write is an op sent to the writer goroutine. The writer takes one op, drains whatever else
// is already queued (no timer: a lone op commits at once, and under load ops pile up while the previous
// commit's fsync runs), runs them one after the other inside one bolt transaction, commits once (one fsync) and
// only then answers each caller. So an acknowledged write is durable and concurrent writers share fsyncs.
//
// An op is split into prepare, which only reads and decides, and the writes it returns, which the writer
// applies. A rejected op (prepare returned an error) therefore leaves no trace in the shared transaction, and
// later ops of the batch still see the writes of earlier ones.

const (
	opQueueLen  = 4096 // buffered ops; senders block (or give up on ctx) beyond this
	maxBatchOps = 4096 // ops per transaction; bounds transaction size and latency under extreme load
)

// op states: the caller may abandon a queued op (ctx done) only before the writer has taken it.
const (
	opQueued int32 = iota
	opTaken
	opAbandoned
)

// write is one key change; a nil value deletes the key. Key and value must be owned by the op (not slices
// returned by bolt), because bolt keeps them until the commit.
type write struct {
	bucket, key, value []byte
}

type op struct {
	ctx     context.Context
	name    string // for errors and logs, e.g. `update "alice@ims.test"`
	prepare func(tx *bolt.Tx) ([]write, error)
	state   atomic.Int32
	done    chan error // buffered: the writer never blocks answering
}

type writerStats struct {
	commits atomic.Uint64 // transactions committed
	ops     atomic.Uint64 // ops applied in them
}

// Stats counts the writer's work since Open; Ops/Commits is the average group-commit batch size.
type Stats struct {
	Commits uint64
	Ops     uint64
}

// Stats returns the writer counters.
func (db *DB) Stats() Stats {
	return Stats{Commits: db.stats.commits.Load(), Ops: db.stats.ops.Load()}
}

// submit queues an op and waits for its outcome. It returns ctx.Err() if ctx ends before the writer has taken
// the op (nothing is written then); once taken, the op's real outcome is returned even if ctx ends meanwhile,
// so a nil error always means "durably written" and ctx.Err() always means "not written".
func (db *DB) submit(ctx context.Context, name string, prepare func(tx *bolt.Tx) ([]write, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := &op{ctx: ctx, name: name, prepare: prepare, done: make(chan error, 1)}

	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return fmt.Errorf("store: %s: %w", name, ErrClosed)
	}
	select {
	case db.ops <- o:
		db.mu.RUnlock()
	case <-ctx.Done():
		db.mu.RUnlock()
		return ctx.Err()
	}

	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		if o.state.CompareAndSwap(opQueued, opAbandoned) {
			return ctx.Err()
		}
		return <-o.done // the writer has it: wait for the truth (at most one commit)
	}
}

// writer is the single goroutine that commits ops; it exits when ops is closed and drained.
func (db *DB) writer() {
	defer close(db.done)
	batch := make([]*op, 0, 64)
	for {
		o, ok := <-db.ops
		if !ok {
			return
		}
		batch = append(batch[:0], o)
	drain:
		for len(batch) < maxBatchOps {
			select {
			case o, ok := <-db.ops:
				if !ok {
					break drain // commit what we have; the next receive sees the closed channel
				}
				batch = append(batch, o)
			default:
				break drain
			}
		}
		db.commit(batch)
		clear(batch) // let answered ops be collected
	}
}

// errNothingToCommit rolls back a transaction in which every op was rejected or abandoned: no fsync for nothing.
var errNothingToCommit = errors.New("nothing to commit")

// commit runs a batch in one transaction and answers every op.
func (db *DB) commit(batch []*op) {
	errs := make([]error, len(batch)) // per-op rejection; nil = applied
	applied := 0
	var written []write // what the read cache must forget once committed
	txErr := db.bolt.Update(func(tx *bolt.Tx) error {
		for i, o := range batch {
			if o.ctx.Err() != nil {
				// The caller is leaving; take the op away from it only if it has not already abandoned it.
				o.state.CompareAndSwap(opQueued, opAbandoned)
			}
			if !o.state.CompareAndSwap(opQueued, opTaken) {
				errs[i] = o.ctx.Err() // abandoned (only ever with ctx done): nothing written
				continue
			}
			ws, err := db.prepare(o, tx)
			if err == nil {
				err = checkWrites(ws)
			}
			if err != nil {
				errs[i] = err
				continue
			}
			if err := applyWrites(tx, ws); err != nil {
				return fmt.Errorf("%s: %w", o.name, err) // the transaction is now dirty: fail the whole batch
			}
			written = append(written, ws...)
			applied++
		}
		if applied == 0 {
			return errNothingToCommit
		}
		return nil
	})
	if errors.Is(txErr, errNothingToCommit) {
		txErr = nil
	}
	if txErr != nil {
		db.log.Error("store: commit failed; every write of the batch is lost", "ops", applied, "err", txErr)
		txErr = fmt.Errorf("store: commit: %w", txErr)
	} else if applied > 0 {
		// Before any caller is answered, so a caller that reads its own write never sees the old value.
		db.cache.invalidate(written)
		db.stats.commits.Add(1)
		db.stats.ops.Add(uint64(applied))
	}
	for i, o := range batch {
		err := errs[i]
		if err == nil {
			err = txErr
		}
		o.done <- err
	}
}

// prepare runs an op's prepare, turning a panic (e.g. in an Update callback) into an error for that op only.
func (db *DB) prepare(o *op, tx *bolt.Tx) (ws []write, err error) {
	defer func() {
		if r := recover(); r != nil {
			db.log.Error("store: panic in write", "op", o.name, "panic", r, "stack", string(debug.Stack()))
			ws, err = nil, fmt.Errorf("store: %s: panic: %v", o.name, r)
		}
	}()
	return o.prepare(tx)
}

// checkWrites rejects what bolt would refuse halfway through applying, so applyWrites only fails on real
// storage errors.
func checkWrites(ws []write) error {
	for _, w := range ws {
		if len(w.key) == 0 || len(w.key) > bolt.MaxKeySize {
			return fmt.Errorf("store: key of %d bytes in %s: %w", len(w.key), w.bucket, ErrInvalid)
		}
		if int64(len(w.value)) > bolt.MaxValueSize {
			return fmt.Errorf("store: value of %d bytes in %s: %w", len(w.value), w.bucket, ErrInvalid)
		}
	}
	return nil
}

func applyWrites(tx *bolt.Tx, ws []write) error {
	for _, w := range ws {
		b := tx.Bucket(w.bucket)
		var err error
		if w.value == nil {
			err = b.Delete(w.key)
		} else {
			err = b.Put(w.key, w.value)
		}
		if err != nil {
			return fmt.Errorf("%s %q: %w", w.bucket, w.key, err)
		}
	}
	return nil
}
