package store

import (
	"bytes"
	"slices"
	"sync"
)

// readCache keeps decoded subscribers and registrations in memory so that the Cx read path (UAR, LIR, and the
// identity checks of MAR and SAR) costs a map lookup instead of a bolt transaction and two JSON decodes. The
// database stays the only source of truth: entries are filled by reads and dropped by the writer after every
// commit that touches their keys.
//
// A reader that misses reads the database and then inserts what it read, but only if no commit finished since it
// started (gen unchanged). Commits bump gen and drop their keys under the same lock, so a value read before a
// commit can never be inserted after that commit's invalidation.
type readCache struct {
	mu    sync.Mutex
	gen   uint64
	subs  map[string]Subscriber   // IMPI → subscriber
	impus map[string]string       // IMPU → IMPI
	regs  map[string]Registration // IMPI → registration
}

func newReadCache() *readCache {
	return &readCache{subs: map[string]Subscriber{}, impus: map[string]string{}, regs: map[string]Registration{}}
}

func (c *readCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

func (c *readCache) subscriber(impi string) (Subscriber, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.subs[impi]
	return cloneSub(s), ok
}

func (c *readCache) byIMPU(impu string) (Subscriber, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	impi, ok := c.impus[impu]
	if !ok {
		return Subscriber{}, false
	}
	s, ok := c.subs[impi]
	return cloneSub(s), ok
}

func (c *readCache) registration(impi string) (Subscriber, Registration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.subs[impi]
	if !ok {
		return Subscriber{}, Registration{}, false
	}
	r, ok := c.regs[impi]
	return cloneSub(s), cloneReg(r), ok
}

// put inserts what a reader read when no commit finished since generation g. reg may be nil.
func (c *readCache) put(g uint64, impu string, s Subscriber, reg *Registration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != g {
		return
	}
	c.subs[s.IMPI] = cloneSub(s)
	if impu != "" {
		c.impus[impu] = s.IMPI
	}
	if reg != nil {
		c.regs[s.IMPI] = cloneReg(*reg)
	}
}

// invalidate drops every entry a committed batch wrote.
func (c *readCache) invalidate(ws []write) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, w := range ws {
		k := string(w.key)
		switch {
		case bytes.Equal(w.bucket, bucketSubscribers):
			delete(c.subs, k)
		case bytes.Equal(w.bucket, bucketIMPUs):
			delete(c.impus, k)
		case bytes.Equal(w.bucket, bucketRegistrations):
			delete(c.regs, k)
		}
	}
}

func cloneSub(s Subscriber) Subscriber {
	s.IMPUs = slices.Clone(s.IMPUs)
	s.VisitedNetworks = slices.Clone(s.VisitedNetworks)
	return s
}

func cloneReg(r Registration) Registration {
	r.Restoration = bytes.Clone(r.Restoration)
	return r
}
