package ue

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// generateCalls places calls at Config.CallRate, or the rate SetCallRate set since (exponential gaps: Poisson arrivals) from a random free,
// registered caller (one of the Config.Mix share of phones) to a random registered phone of this process, or
// to a random number of the fixed callee range. Each call holds for Config.HoldTime.
//
// The arrivals follow an absolute schedule: arrival k is due at start + the sum of the first k gaps, and the
// generator waits for that instant, not for a gap counted from when it woke up. A tick that comes late (timer
// granularity, a busy core, the time taken to start the previous call) places every call it owes at once, so
// the rate placed does not drift below the rate asked. The gaps come from their own stream of the seed, so the
// schedule of a seed is the same whatever else the phones draw.
func (u *UE) generateCalls(ctx context.Context) {
	var callers []*Phone
	for _, p := range u.phones {
		if p.caller {
			callers = append(callers, p)
		}
	}
	if len(callers) == 0 {
		return
	}
	u.log.Info("ue: placing calls", "rate", u.cfg.CallRate, "callers", len(callers), "hold", u.cfg.HoldTime.String())
	sched := newArrivals(u.seed, u.cfg.CallRate, time.Now())
	u.gen.start(sched.start)
	// The run ends when ctx does, not when this goroutine next gets a core to notice it.
	defer context.AfterFunc(ctx, u.gen.stop)()
	defer u.gen.stop()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		rate := u.CallRate()
		if rate <= 0 { // paused (SetCallRate(0)): look again soon; the schedule starts afresh when it resumes
			t.Reset(50 * time.Millisecond)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			sched.restart(time.Now())
			continue
		}
		due := sched.nextAt(rate)
		if wait := time.Until(due); wait > 0 {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		u.stats.callsOffered.Add(1)
		caller := u.pickCaller(callers)
		if caller == nil {
			u.stats.callsSkipped.Add(1)
			continue
		}
		callee := u.pickCallee(caller)
		if callee == "" {
			caller.busy.Store(false)
			u.stats.callsSkipped.Add(1)
			continue
		}
		started := u.goBackground(func() {
			defer caller.busy.Store(false)
			_, _ = caller.Call(ctx, callee, u.cfg.HoldTime) // recorded and counted by Call
		})
		if !started {
			caller.busy.Store(false)
			return
		}
		u.stats.callsPlaced.Add(1)
	}
}

// arrivals is a Poisson arrival schedule: exponential gaps of mean 1/rate seconds, summed from start.
type arrivals struct {
	rng   *rand.Rand
	rate  float64
	start time.Time
	at    float64 // seconds from start of the last arrival returned
}

func newArrivals(seed int64, rate float64, start time.Time) *arrivals {
	return &arrivals{rng: phoneRand(seed, 0, 3), rate: rate, start: start}
}

// next returns the instant the next arrival is due. The offset is summed in float64 seconds and converted
// once, so rounding does not accumulate over a long run.
func (a *arrivals) next() time.Time { return a.nextAt(a.rate) }

// nextAt is next at another rate (a load step, SetCallRate): the gap from the last arrival is drawn at the new
// rate, so a step takes effect from the next arrival on and the schedule stays absolute.
func (a *arrivals) nextAt(rate float64) time.Time {
	a.rate = rate
	a.at += a.rng.ExpFloat64() / rate
	return a.start.Add(time.Duration(a.at * float64(time.Second)))
}

// restart anchors the schedule at t (after a pause: the calls not placed while paused are not owed).
func (a *arrivals) restart(t time.Time) { a.start, a.at = t, 0 }

// generator is when the call generator ran, for the rate it placed.
type generator struct {
	mu         sync.Mutex
	began, end time.Time
}

func (g *generator) start(t time.Time) {
	g.mu.Lock()
	g.began = t
	g.mu.Unlock()
}

// stop records the end of the run; the first call counts.
func (g *generator) stop() {
	g.mu.Lock()
	if g.end.IsZero() {
		g.end = time.Now()
	}
	g.mu.Unlock()
}

// elapsed is how long the generator has run (until now while it runs; 0 if it never started).
func (g *generator) elapsed() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.began.IsZero():
		return 0
	case g.end.IsZero():
		return time.Since(g.began)
	}
	return g.end.Sub(g.began)
}

// pickCaller returns a registered caller that is not in a call, marked busy, or nil after a few tries.
func (u *UE) pickCaller(callers []*Phone) *Phone {
	for range 8 {
		p := callers[u.intn(len(callers))]
		if p.Registered() && p.busy.CompareAndSwap(false, true) {
			return p
		}
	}
	return nil
}

// pickCallee returns the callee's user name, or "" after a few tries.
func (u *UE) pickCallee(caller *Phone) string {
	if u.cfg.CalleeCount > 0 {
		for range 8 {
			user := u.cfg.Users.User(u.cfg.CalleeFrom + u.intn(u.cfg.CalleeCount))
			if user != caller.user {
				return user
			}
		}
		return ""
	}
	for range 8 {
		p := u.phones[u.intn(len(u.phones))]
		if p != caller && p.Registered() {
			return p.user
		}
	}
	return ""
}

// probeCalls makes every phone call the next phone of this process's range once per ProbeInterval (SPEC §6:
// interruption per affected user, both directions), each from a random phase. A probe does not wait for the
// phone's other calls: a call stuck in a node that died must not hide the next attempt.
func (u *UE) probeCalls(ctx context.Context) {
	n := len(u.phones)
	if n < 2 {
		return
	}
	u.log.Info("ue: probe calls", "interval", u.cfg.ProbeInterval.String(), "phones", n)
	var wg sync.WaitGroup
	for i, p := range u.phones {
		next := u.phones[(i+1)%n]
		u.rngMu.Lock()
		phase := time.Duration(u.rng.Float64() * float64(u.cfg.ProbeInterval))
		u.rngMu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTimer(phase)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				t.Reset(u.cfg.ProbeInterval)
				if !p.Registered() || !next.Registered() {
					u.stats.callsSkipped.Add(1)
					continue
				}
				if !u.goBackground(func() { _, _ = p.Call(ctx, next.user, u.cfg.HoldTime) }) {
					return
				}
			}
		}()
	}
	wg.Wait()
}
