// Package store is the HSS's durable subscriber and registration database: an embedded bbolt file
// (<dir>/hss.db) holding JSON values in three buckets (subscribers, IMPU index, registrations).
//
// Writes go through one writer goroutine that commits everything queued in a single fsync'd transaction
// (group commit), so a write is on disk before its call returns and many concurrent writers share each fsync.
// Reads use their own read-only transactions and run concurrently with the writer.
package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// FileName is the database file inside the data directory.
const FileName = "hss.db"

// SchemaVersion is the layout this build reads and writes (buckets, key and value encodings).
const SchemaVersion = 1

// Errors; check with errors.Is.
var (
	ErrNotFound  = errors.New("not found")
	ErrIMPUTaken = errors.New("public identity belongs to another subscriber")
	ErrInvalid   = errors.New("invalid")
	ErrExists    = errors.New("already exists")
	ErrClosed    = errors.New("store closed")
)

var (
	bucketMeta          = []byte("meta")
	bucketSubscribers   = []byte("subscribers")   // IMPI → JSON Subscriber (no password)
	bucketIMPUs         = []byte("impus")         // IMPU → IMPI
	bucketRegistrations = []byte("registrations") // IMPI → JSON Registration
	keySchemaVersion    = []byte("schema_version")
)

// Options tune Open. The zero value is the production setting.
type Options struct {
	Logger *slog.Logger
	// NoSync skips fsync on commit: for tests and benchmarks only. The default (false) fsyncs every commit.
	NoSync bool
	// LockTimeout bounds the wait for the file lock held by another process; default 2s.
	LockTimeout time.Duration
	// Now is the clock for timestamps the store sets (Registration.UpdatedAt); default time.Now.
	Now func() time.Time
}

// DB is an open HSS database. All methods are safe for concurrent use.
type DB struct {
	bolt *bolt.DB
	log  *slog.Logger
	now  func() time.Time

	// mu guards closed and the send side of ops: senders hold it for reading while sending, Close takes it
	// for writing, so no send can race with close(ops).
	mu     sync.RWMutex
	closed bool
	ops    chan *op
	done   chan struct{} // closed when the writer has exited

	stats writerStats
	cache *readCache
}

// Open opens (creating if needed) the database in dir and starts its writer.
func Open(dir string, opts Options) (*DB, error) {
	if dir == "" {
		return nil, fmt.Errorf("store: open: %w: dir: required", ErrInvalid)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = 2 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	path := filepath.Join(dir, FileName)
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: opts.LockTimeout,
		NoSync:  opts.NoSync,
		// As etcd does: do not write the freelist on every commit (less I/O per commit); it is rebuilt by a
		// scan on open, which is cheap at HSS sizes.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if err := bdb.Update(initSchema); err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db := &DB{
		bolt:  bdb,
		log:   opts.Logger,
		now:   opts.Now,
		ops:   make(chan *op, opQueueLen),
		done:  make(chan struct{}),
		cache: newReadCache(),
	}
	go db.writer()
	return db, nil
}

// initSchema creates the buckets of a new database or checks the schema version of an existing one.
func initSchema(tx *bolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return err
	}
	if v := meta.Get(keySchemaVersion); v != nil {
		var got int
		if err := json.Unmarshal(v, &got); err != nil {
			return fmt.Errorf("schema version %q: %w", v, err)
		}
		if got != SchemaVersion {
			return fmt.Errorf("schema version %d is not supported (this build reads %d)", got, SchemaVersion)
		}
	} else {
		v, _ := json.Marshal(SchemaVersion)
		if err := meta.Put(keySchemaVersion, v); err != nil {
			return err
		}
	}
	for _, name := range [][]byte{bucketSubscribers, bucketIMPUs, bucketRegistrations} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return nil
}

// Close waits for queued writes to commit, stops the writer and closes the file. Later calls return nil.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil
	}
	db.closed = true
	close(db.ops) // no sender holds mu.RLock now, so nobody can send on ops any more
	db.mu.Unlock()
	<-db.done
	if err := db.bolt.Close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// Path returns the database file path.
func (db *DB) Path() string { return db.bolt.Path() }

// GetSubscriber returns the subscriber with that private identity, or ErrNotFound.
func (db *DB) GetSubscriber(impi string) (Subscriber, error) {
	if sub, ok := db.cache.subscriber(impi); ok {
		return sub, nil
	}
	g := db.cache.generation()
	var sub Subscriber
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		sub, err = getSubscriber(tx, impi)
		return err
	})
	if err != nil {
		return Subscriber{}, fmt.Errorf("store: get %q: %w", impi, err)
	}
	db.cache.put(g, "", sub, nil)
	return sub, nil
}

// LookupIMPU returns the subscriber owning a public identity, or ErrNotFound.
func (db *DB) LookupIMPU(impu string) (Subscriber, error) {
	if sub, ok := db.cache.byIMPU(impu); ok {
		return sub, nil
	}
	g := db.cache.generation()
	var sub Subscriber
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		sub, err = lookupIMPU(tx, impu)
		return err
	})
	if err != nil {
		return Subscriber{}, fmt.Errorf("store: lookup %q: %w", impu, err)
	}
	db.cache.put(g, impu, sub, nil)
	return sub, nil
}

// GetRegistration returns the registration of a private identity; State NotRegistered (IMPI filled) when none
// is stored, ErrNotFound when the subscriber does not exist.
func (db *DB) GetRegistration(impi string) (Registration, error) {
	_, reg, err := db.GetSubscriberRegistration(impi)
	return reg, err
}

// GetSubscriberRegistration returns a subscriber and its registration read in one transaction.
func (db *DB) GetSubscriberRegistration(impi string) (Subscriber, Registration, error) {
	if sub, reg, ok := db.cache.registration(impi); ok {
		return sub, reg, nil
	}
	g := db.cache.generation()
	var (
		sub Subscriber
		reg Registration
	)
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		if sub, err = getSubscriber(tx, impi); err != nil {
			return err
		}
		reg, err = getRegistration(tx, impi)
		return err
	})
	if err != nil {
		return Subscriber{}, Registration{}, fmt.Errorf("store: registration of %q: %w", impi, err)
	}
	db.cache.put(g, "", sub, &reg)
	return sub, reg, nil
}

// LookupIMPURegistration returns the subscriber owning a public identity and its registration, read in one
// transaction; ErrNotFound for an unknown IMPU.
func (db *DB) LookupIMPURegistration(impu string) (Subscriber, Registration, error) {
	if sub, ok := db.cache.byIMPU(impu); ok {
		if _, reg, ok := db.cache.registration(sub.IMPI); ok {
			return sub, reg, nil
		}
	}
	g := db.cache.generation()
	var (
		sub Subscriber
		reg Registration
	)
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		if sub, err = lookupIMPU(tx, impu); err != nil {
			return err
		}
		reg, err = getRegistration(tx, sub.IMPI)
		return err
	})
	if err != nil {
		return Subscriber{}, Registration{}, fmt.Errorf("store: registration of %q: %w", impu, err)
	}
	db.cache.put(g, impu, sub, &reg)
	return sub, reg, nil
}

// ListSubscribers returns up to limit subscribers with IMPI > after, in IMPI (byte) order; pass the last IMPI
// of a page as after to get the next one. limit <= 0 means no limit.
func (db *DB) ListSubscribers(after string, limit int) ([]Subscriber, error) {
	var subs []Subscriber
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketSubscribers).Cursor()
		k, v := c.Seek([]byte(after))
		if k != nil && bytes.Equal(k, []byte(after)) {
			k, v = c.Next()
		}
		for ; k != nil && (limit <= 0 || len(subs) < limit); k, v = c.Next() {
			var s Subscriber
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("decode subscriber %q: %w", k, err)
			}
			subs = append(subs, s)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	return subs, nil
}

// CountSubscribers returns the number of subscribers.
func (db *DB) CountSubscribers() (int, error) {
	var n int
	err := db.bolt.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketSubscribers).Stats().KeyN
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: count: %w", err)
	}
	return n, nil
}

// getSubscriber reads a subscriber inside tx; ErrNotFound when absent.
func getSubscriber(tx *bolt.Tx, impi string) (Subscriber, error) {
	v := tx.Bucket(bucketSubscribers).Get([]byte(impi))
	if v == nil {
		return Subscriber{}, fmt.Errorf("subscriber %q: %w", impi, ErrNotFound)
	}
	var s Subscriber
	if err := json.Unmarshal(v, &s); err != nil {
		return Subscriber{}, fmt.Errorf("decode subscriber %q: %w", impi, err)
	}
	return s, nil
}

func lookupIMPU(tx *bolt.Tx, impu string) (Subscriber, error) {
	impi := tx.Bucket(bucketIMPUs).Get([]byte(impu))
	if impi == nil {
		return Subscriber{}, fmt.Errorf("public identity %q: %w", impu, ErrNotFound)
	}
	return getSubscriber(tx, string(impi))
}

// getRegistration reads the registration of an existing subscriber; the NotRegistered default when absent.
func getRegistration(tx *bolt.Tx, impi string) (Registration, error) {
	v := tx.Bucket(bucketRegistrations).Get([]byte(impi))
	if v == nil {
		return Registration{IMPI: impi, State: NotRegistered}, nil
	}
	var r Registration
	if err := json.Unmarshal(v, &r); err != nil {
		return Registration{}, fmt.Errorf("decode registration %q: %w", impi, err)
	}
	return r, nil
}
