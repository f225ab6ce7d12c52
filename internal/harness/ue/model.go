package ue

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Role is what a subscriber does in the traffic model (Model).
type Role string

// The roles of Model's population.
const (
	RoleCaller Role = "caller"  // places calls (BHCA) and receives them
	RoleMTOnly Role = "mt_only" // only receives calls
	RoleIdle   Role = "idle"    // registered, places no calls and is not called by the model's traffic
)

// Holding-time distributions (Model.Holding).
const (
	HoldingExponential = "exponential"
	HoldingFixed       = "fixed"
)

// Model is a traffic model of real subscribers: each calling user places calls with exponential inter-arrival
// times (a Poisson process of BHCA calls per busy hour), to a random other user that takes calls, and holds
// each answered call for a time drawn from the holding-time distribution. Shares of the population are idle or
// receive calls only. Every draw comes from a per-phone source seeded from Config.Seed and the user number, so a
// run is repeatable whatever the goroutines' order.
type Model struct {
	// BHCA is the busy-hour call attempts per calling user (calls per user per hour; > 0).
	BHCA float64 `yaml:"bhca"`
	// Holding is the holding-time distribution: "exponential" (default) or "fixed".
	Holding string `yaml:"holding"`
	// HoldingMean is the mean (exponential) or the value (fixed) of the holding time (default 90s).
	HoldingMean time.Duration `yaml:"holding_mean"`
	// IdleShare is the share of users that place no calls and get none of the model's calls (0..1).
	IdleShare float64 `yaml:"idle_share"`
	// MTOnlyShare is the share of users that only receive calls (0..1; IdleShare+MTOnlyShare <= 1).
	MTOnlyShare float64 `yaml:"mt_only_share"`
}

const defaultHoldingMean = 90 * time.Second

func (m *Model) applyDefaults() {
	if m.Holding == "" {
		m.Holding = HoldingExponential
	}
	if m.HoldingMean == 0 {
		m.HoldingMean = defaultHoldingMean
	}
}

// Validate names the bad field (prefix: the field path of the model, e.g. "model").
func (m *Model) Validate(prefix string) error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%s.%s: %s", prefix, field, fmt.Sprintf(format, a...))
	}
	share := func(x float64) bool { return x >= 0 && x <= 1 && !math.IsNaN(x) }
	switch {
	case !(m.BHCA > 0) || math.IsInf(m.BHCA, 0):
		return bad("bhca", "must be a positive number of calls per user per hour, is %v", m.BHCA)
	case m.Holding != HoldingExponential && m.Holding != HoldingFixed:
		return bad("holding", "must be %s or %s, is %q", HoldingExponential, HoldingFixed, m.Holding)
	case m.HoldingMean < 0:
		return bad("holding_mean", "must not be negative, is %s", m.HoldingMean)
	case !share(m.IdleShare):
		return bad("idle_share", "must be between 0 and 1, is %v", m.IdleShare)
	case !share(m.MTOnlyShare):
		return bad("mt_only_share", "must be between 0 and 1, is %v", m.MTOnlyShare)
	case m.IdleShare+m.MTOnlyShare > 1+1e-9:
		return bad("mt_only_share", "idle_share + mt_only_share must not exceed 1, is %v", m.IdleShare+m.MTOnlyShare)
	}
	return nil
}

// MeanGap is the mean time between two calls of one calling user (3600 s / BHCA).
func (m *Model) MeanGap() time.Duration { return time.Duration(float64(time.Hour) / m.BHCA) }

// NextGap draws the time to a calling user's next call attempt (exponential with mean MeanGap).
func (m *Model) NextGap(rng *rand.Rand) time.Duration {
	return time.Duration(rng.ExpFloat64() * float64(m.MeanGap()))
}

// HoldTime draws how long an answered call lasts.
func (m *Model) HoldTime(rng *rand.Rand) time.Duration {
	if m.Holding == HoldingFixed {
		return m.HoldingMean
	}
	return time.Duration(rng.ExpFloat64() * float64(m.HoldingMean))
}

// AssignRoles gives n users their roles: exactly round(n×idle) idle users and round(n×mtOnly) MT-only users
// (fewer if they would not fit), the rest callers, at positions chosen by rng.
func AssignRoles(n int, idle, mtOnly float64, rng *rand.Rand) []Role {
	nIdle := min(n, int(math.Round(float64(n)*idle)))
	nMT := min(n-nIdle, int(math.Round(float64(n)*mtOnly)))
	roles := make([]Role, n)
	for k, i := range rng.Perm(n) {
		switch {
		case k < nIdle:
			roles[i] = RoleIdle
		case k < nIdle+nMT:
			roles[i] = RoleMTOnly
		default:
			roles[i] = RoleCaller
		}
	}
	return roles
}

// RefreshAfter is when a phone refreshes a registration granted for period, as TS 24.229 §5.1.1.4.1 has it:
// when half of the period has passed if the period is 1200 s or less, otherwise 600 s before it expires.
func RefreshAfter(period time.Duration) time.Duration {
	if period > 1200*time.Second {
		return period - 600*time.Second
	}
	return period / 2
}

// phoneRand returns the random source of phone n: seeded from the run seed and the user number only.
func phoneRand(seed int64, n int, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed)^0x9e3779b97f4a7c15*stream, uint64(n)))
}

// modelCalls runs the model's calls of one calling phone until ctx ends: exponential gaps, a random callee among
// the users that take calls, a drawn holding time. An arrival that finds the phone unregistered or still in its
// previous call is skipped (counted), as a real user cannot dial then either.
func (u *UE) modelCalls(ctx context.Context, p *Phone, callees []*Phone) {
	m := u.cfg.Model
	rng := phoneRand(u.seed, p.n, 1)
	// An absolute schedule, as generateCalls: the next attempt is due a gap after the previous one was due, not
	// after the timer fired, so a late tick does not shift every later call.
	next := time.Now().Add(m.NextGap(rng))
	t := time.NewTimer(time.Until(next))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next = next.Add(m.NextGap(rng))
		t.Reset(time.Until(next))
		var callee *Phone
		for range 8 {
			if c := callees[rng.IntN(len(callees))]; c != p {
				callee = c
				break
			}
		}
		hold := m.HoldTime(rng)
		if callee == nil || !p.Registered() || !p.busy.CompareAndSwap(false, true) {
			u.stats.callsSkipped.Add(1)
			continue
		}
		if !u.goBackground(func() {
			defer p.busy.Store(false)
			_, _ = p.Call(ctx, callee.user, hold)
		}) {
			p.busy.Store(false)
			return
		}
	}
}

// runModel starts the model's calls of every calling phone.
func (u *UE) runModel(ctx context.Context) {
	var callees []*Phone
	callers := 0
	for _, p := range u.phones {
		if p.role != RoleIdle {
			callees = append(callees, p)
		}
		if p.role == RoleCaller {
			callers++
		}
	}
	u.log.Info("ue: traffic model", "bhca", u.cfg.Model.BHCA, "callers", callers, "callees", len(callees),
		"holding", u.cfg.Model.Holding, "holding_mean", u.cfg.Model.HoldingMean.String())
	if len(callees) < 2 {
		return
	}
	for _, p := range u.phones {
		if p.role != RoleCaller {
			continue
		}
		if !u.goBackground(func() { u.modelCalls(ctx, p, callees) }) {
			return
		}
	}
}

// Role returns the phone's role in the traffic model (RoleCaller without a model, or RoleIdle for a phone
// that Config.Mix leaves out of the calling share).
func (p *Phone) Role() Role { return p.role }
