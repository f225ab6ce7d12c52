package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// PutSubscriber creates or replaces a subscriber (upsert). It never touches the registration. Public identities
// the new version no longer lists are released. Errors: ErrInvalid (naming the field), ErrIMPUTaken.
func (db *DB) PutSubscriber(ctx context.Context, s Subscriber) error {
	_, _, err := db.putSubscribers(ctx, fmt.Sprintf("put %q", s.IMPI), []Subscriber{s}, false)
	return err
}

// CreateSubscriber adds a subscriber; ErrExists if the IMPI is already provisioned.
func (db *DB) CreateSubscriber(ctx context.Context, s Subscriber) error {
	_, _, err := db.putSubscribers(ctx, fmt.Sprintf("create %q", s.IMPI), []Subscriber{s}, true)
	return err
}

// Import upserts subscribers in one transaction (one fsync, all or nothing). It is idempotent: a subscriber
// whose stored form is unchanged is not rewritten and counts as neither added nor updated; registrations are
// never touched. The list must not repeat an IMPI or an IMPU.
func (db *DB) Import(ctx context.Context, subs []Subscriber) (added, updated int, err error) {
	if len(subs) == 0 {
		return 0, 0, nil
	}
	name := fmt.Sprintf("import of %d subscribers", len(subs))
	if len(subs) == 1 {
		name = fmt.Sprintf("import %q", subs[0].IMPI)
	}
	return db.putSubscribers(ctx, name, subs, false)
}

// pendingSub is a normalized, validated, encoded subscriber on its way into the writer.
type pendingSub struct {
	sub  Subscriber
	key  []byte
	json []byte
}

// putSubscribers normalizes, validates and encodes subs in the caller's goroutine, then queues one op that
// upserts (or, with create, inserts) all of them.
func (db *DB) putSubscribers(ctx context.Context, name string, subs []Subscriber, create bool) (added, updated int, err error) {
	pending, err := preparePending(subs)
	if err != nil {
		return 0, 0, fmt.Errorf("store: %s: %w", name, err)
	}
	err = db.submit(ctx, name, func(tx *bolt.Tx) ([]write, error) {
		ws, a, u, err := upsertWrites(tx, pending, create)
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", name, err)
		}
		added, updated = a, u // read by the caller after submit returns (ordered by the done channel)
		return ws, nil
	})
	if err != nil {
		return 0, 0, err
	}
	return added, updated, nil
}

// preparePending checks a list before it reaches the writer, including duplicates within the list.
func preparePending(subs []Subscriber) ([]pendingSub, error) {
	label := func(i int) string {
		if len(subs) == 1 {
			return ""
		}
		return fmt.Sprintf("subscribers[%d]: ", i)
	}
	pending := make([]pendingSub, len(subs))
	impis := make(map[string]int, len(subs))
	impus := make(map[string]int, len(subs))
	for i, s := range subs {
		s = s.clone()
		s.Normalize()
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("%s%w", label(i), err)
		}
		if j, dup := impis[s.IMPI]; dup {
			return nil, fmt.Errorf("%simpi %q repeats subscribers[%d]: %w", label(i), s.IMPI, j, ErrInvalid)
		}
		impis[s.IMPI] = i
		for k, u := range s.IMPUs {
			if j, dup := impus[u]; dup {
				return nil, fmt.Errorf("%ssubscriber %q: impus[%d] %q is also listed by subscribers[%d] %q: %w",
					label(i), s.IMPI, k, u, j, subs[j].IMPI, ErrInvalid)
			}
			impus[u] = i
		}
		v, err := json.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("%sencode %q: %w", label(i), s.IMPI, err)
		}
		pending[i] = pendingSub{sub: s, key: []byte(s.IMPI), json: v}
	}
	return pending, nil
}

// upsertWrites decides, reading only, what storing pending takes. The IMPU index is checked against the
// database as it will be after this op: identities released by the list's own subscribers (pass 1) may be
// claimed by others in the list (pass 2), whatever the order of the list.
func upsertWrites(tx *bolt.Tx, pending []pendingSub, create bool) (ws []write, added, updated int, err error) {
	subsB, idxB := tx.Bucket(bucketSubscribers), tx.Bucket(bucketIMPUs)

	// owner overlays the index with this op's changes; "" means released.
	owner := map[string]string{}
	ownerOf := func(impu string) string {
		if o, ok := owner[impu]; ok {
			return o
		}
		return string(idxB.Get([]byte(impu)))
	}
	var idxWrites []write
	setOwner := func(impu, impi string) {
		owner[impu] = impi
		w := write{bucket: bucketIMPUs, key: []byte(impu)}
		if impi != "" {
			w.value = []byte(impi)
		}
		idxWrites = append(idxWrites, w)
	}

	changed := make([]bool, len(pending))
	for i, p := range pending { // pass 1: what changes, and which identities are released
		old := subsB.Get(p.key)
		if old != nil && create {
			return nil, 0, 0, fmt.Errorf("subscriber %q: %w", p.sub.IMPI, ErrExists)
		}
		if old != nil && bytes.Equal(old, p.json) {
			continue // idempotent: unchanged
		}
		changed[i] = true
		if old == nil {
			added++
			continue
		}
		updated++
		var prev Subscriber
		if err := json.Unmarshal(old, &prev); err != nil {
			return nil, 0, 0, fmt.Errorf("decode subscriber %q: %w", p.sub.IMPI, err)
		}
		for _, u := range prev.IMPUs {
			if !slices.Contains(p.sub.IMPUs, u) && ownerOf(u) == p.sub.IMPI {
				setOwner(u, "")
			}
		}
	}
	for i, p := range pending { // pass 2: claim identities
		if !changed[i] {
			continue
		}
		for k, u := range p.sub.IMPUs {
			switch o := ownerOf(u); o {
			case p.sub.IMPI:
			case "":
				setOwner(u, p.sub.IMPI)
			default:
				return nil, 0, 0, fmt.Errorf("subscriber %q: impus[%d] %q: %w (owner %q)", p.sub.IMPI, k, u, ErrIMPUTaken, o)
			}
		}
		ws = append(ws, write{bucket: bucketSubscribers, key: p.key, value: p.json})
	}
	return append(idxWrites, ws...), added, updated, nil
}

// DeleteSubscriber removes a subscriber, its IMPU index entries and its registration; ErrNotFound if unknown.
func (db *DB) DeleteSubscriber(ctx context.Context, impi string) error {
	name := fmt.Sprintf("delete %q", impi)
	return db.submit(ctx, name, func(tx *bolt.Tx) ([]write, error) {
		sub, err := getSubscriber(tx, impi)
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", name, err)
		}
		key := []byte(impi)
		ws := []write{
			{bucket: bucketSubscribers, key: key},
			{bucket: bucketRegistrations, key: key},
		}
		idx := tx.Bucket(bucketIMPUs)
		for _, u := range sub.IMPUs {
			if string(idx.Get([]byte(u))) == impi {
				ws = append(ws, write{bucket: bucketIMPUs, key: []byte(u)})
			}
		}
		return ws, nil
	})
}

// Update runs fn on a copy of the subscriber and its registration (State NotRegistered when none is stored)
// inside the write transaction and stores the registration fn leaves behind, returning what was stored. The
// store keeps reg.IMPI, sets reg.UpdatedAt and rejects an unknown State (ErrInvalid). If fn returns an error,
// nothing is written and that error is returned as is. ErrNotFound for an unknown IMPI.
//
// fn runs on the writer goroutine, so it must be quick and must not call write methods of db (deadlock).
func (db *DB) Update(ctx context.Context, impi string, fn func(sub Subscriber, reg *Registration) error) (Registration, error) {
	name := fmt.Sprintf("update %q", impi)
	var stored Registration
	err := db.submit(ctx, name, func(tx *bolt.Tx) ([]write, error) {
		sub, err := getSubscriber(tx, impi)
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", name, err)
		}
		reg, err := getRegistration(tx, impi)
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", name, err)
		}
		if err := fn(sub, &reg); err != nil {
			return nil, err
		}
		reg.IMPI = impi
		reg.UpdatedAt = db.now()
		if err := reg.validate(); err != nil {
			return nil, fmt.Errorf("store: %s: %w", name, err)
		}
		v, err := json.Marshal(&reg)
		if err != nil {
			return nil, fmt.Errorf("store: %s: encode: %w", name, err)
		}
		stored = reg
		return []write{{bucket: bucketRegistrations, key: []byte(impi), value: v}}, nil
	})
	if err != nil {
		return Registration{}, err
	}
	return stored, nil
}
