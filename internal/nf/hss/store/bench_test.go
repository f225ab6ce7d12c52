package store_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/imslab/quasipool/internal/nf/hss/store"
)

// restorationBlob stands in for an SCSCF-Restoration-Info AVP (Path, Contact, expiry...): a few hundred bytes.
var restorationBlob = bytes.Repeat([]byte("restoration-info;"), 20)

func benchDB(b *testing.B, subs []store.Subscriber) *store.DB {
	b.Helper()
	db, err := store.Open(b.TempDir(), store.Options{}) // fsync on, as in production
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	if _, _, err := db.Import(context.Background(), subs); err != nil {
		b.Fatal(err)
	}
	return db
}

func sar(_ store.Subscriber, reg *store.Registration) error {
	reg.State = store.Registered
	reg.ServerName = "sip:scscf1.ims.test:5060"
	reg.OriginHost = "scscf1.ims.test"
	reg.Restoration = restorationBlob
	return nil
}

func reportWrites(b *testing.B, db *store.DB, before store.Stats) {
	st := db.Stats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	if c := st.Commits - before.Commits; c > 0 {
		b.ReportMetric(float64(st.Ops-before.Ops)/float64(c), "ops/commit")
	}
}

// BenchmarkUpdateParallel is SAR-like registration writes from many goroutines, fsync on. ops/commit is the
// average group-commit batch.
func BenchmarkUpdateParallel(b *testing.B) {
	for _, goroutines := range []int{16, 128, 1024} {
		b.Run(fmt.Sprintf("goroutines=%d", goroutines), func(b *testing.B) {
			lab := store.DefaultLabSubscribers()
			db := benchDB(b, lab)
			ctx := context.Background()
			var next atomic.Uint64
			before := db.Stats()
			b.SetParallelism(max(1, goroutines/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					impi := lab[next.Add(1)%uint64(len(lab))].IMPI
					if _, err := db.Update(ctx, impi, sar); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			reportWrites(b, db, before)
		})
	}
}

// BenchmarkUpdateSerial is one writer at a time: the latency of one fsync'd commit.
func BenchmarkUpdateSerial(b *testing.B) {
	lab := store.DefaultLabSubscribers()
	db := benchDB(b, lab)
	ctx := context.Background()
	before := db.Stats()
	b.ResetTimer()
	for i := range b.N {
		if _, err := db.Update(ctx, lab[i%len(lab)].IMPI, sar); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportWrites(b, db, before)
}

// BenchmarkImport10k imports 10,000 new subscribers into an empty database (one transaction, one fsync).
func BenchmarkImport10k(b *testing.B) {
	subs := store.Generate("user", 1, 10000, 5, "ims.test", "pass")
	b.StopTimer()
	for range b.N {
		db, err := store.Open(b.TempDir(), store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if added, _, err := db.Import(context.Background(), subs); err != nil || added != len(subs) {
			b.Fatal(added, err)
		}
		b.StopTimer()
		_ = db.Close()
	}
}
