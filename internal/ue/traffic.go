package ue

import (
	"context"
	"sync"
	"time"
)

// generateCalls places calls at Config.CallRate, or the rate SetCallRate set since (exponential gaps: Poisson arrivals) from a random free,
// registered caller (one of the Config.Mix share of phones) to a random registered phone of this process, or
// to a random number of the fixed callee range. Each call holds for Config.HoldTime.
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
	for {
		rate := u.CallRate()
		if rate <= 0 { // paused (SetCallRate(0)): look again soon
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		u.rngMu.Lock()
		gap := time.Duration(u.rng.ExpFloat64() / rate * float64(time.Second))
		u.rngMu.Unlock()
		t := time.NewTimer(gap)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
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
	}
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
