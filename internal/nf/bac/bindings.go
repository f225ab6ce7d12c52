package bac

import (
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"
)

// binding is one registered phone, as installed by a 200 to its REGISTER. It is a value: the table hands out
// copies taken under its lock, never a pointer into itself.
type binding struct {
	Token   string
	IMPU    string
	Source  string  // where the phone registered from (ip:port): the address its requests are recognised by
	Addr    string  // where requests for the phone go: its Contact when that is an IP literal with a port, else Source
	Contact sip.Uri // the phone's own Contact URI (parameters cloned at install; never changed afterwards)
	PCSCF   string  // host of the P-CSCF it registered through
	Expires time.Time
}

// contact returns a copy of the phone's Contact URI that the caller may change.
func (b binding) contact() sip.Uri { return *b.Contact.Clone() }

// table holds the bindings by token, with an index of the addresses phones send from (their registration's
// source, and their delivery address: SIPp registers from one process and answers in another).
type table struct {
	mu       sync.Mutex
	max      int
	byToken  map[string]binding
	bySource map[string]map[string]struct{} // source ip:port → tokens registered from it
	byAddr   map[string]map[string]struct{} // delivery ip:port → tokens delivered to it
}

func newTable(max int) *table {
	return &table{max: max, byToken: map[string]binding{}, bySource: map[string]map[string]struct{}{},
		byAddr: map[string]map[string]struct{}{}}
}

func addIndex(idx map[string]map[string]struct{}, key, token string) {
	s := idx[key]
	if s == nil {
		s = map[string]struct{}{}
		idx[key] = s
	}
	s[token] = struct{}{}
}

func delIndex(idx map[string]map[string]struct{}, key, token string) {
	if s := idx[key]; s != nil {
		delete(s, token)
		if len(s) == 0 {
			delete(idx, key)
		}
	}
}

// current returns the binding of a token when it has not expired.
func (t *table) current(token string, now time.Time) (binding, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := t.byToken[token]
	if !ok || now.After(b.Expires) {
		return binding{}, false
	}
	return b, true
}

// full reports whether a new token would exceed the cap (a token already held, even expired, takes no room).
func (t *table) full(token string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, held := t.byToken[token]
	return !held && t.max > 0 && len(t.byToken) >= t.max
}

// install puts a binding in place of the token's previous one; false when the table is full.
func (t *table) install(b binding) bool {
	b.Contact = *b.Contact.Clone()
	t.mu.Lock()
	defer t.mu.Unlock()
	old, held := t.byToken[b.Token]
	if !held && t.max > 0 && len(t.byToken) >= t.max {
		return false
	}
	if held {
		t.unindex(old)
	}
	t.byToken[b.Token] = b
	addIndex(t.bySource, b.Source, b.Token)
	addIndex(t.byAddr, b.Addr, b.Token)
	return true
}

// remove drops a token's binding.
func (t *table) remove(token string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.byToken[token]; ok {
		t.unindex(old)
		delete(t.byToken, token)
	}
}

func (t *table) unindex(b binding) {
	delIndex(t.bySource, b.Source, b.Token)
	delIndex(t.byAddr, b.Addr, b.Token)
}

// originator returns the binding an initial request from src is sent as: the one named by want (the From
// user's token) among the bindings registered from src, or the only one registered from src. n is the number of
// current bindings registered from src (0: src is no registered phone).
func (t *table) originator(src, want string, now time.Time) (b binding, n int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pick(t.bySource[src], want, now)
}

// phoneAt returns the binding of a phone sending from addr (its registration's source or its delivery
// address) for an in-dialog request, chosen as originator does.
func (t *table) phoneAt(addr, want string, now time.Time) (binding, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b, _, ok := t.pick(t.bySource[addr], want, now); ok {
		return b, true
	}
	b, _, ok := t.pick(t.byAddr[addr], want, now)
	return b, ok
}

func (t *table) pick(tokens map[string]struct{}, want string, now time.Time) (binding, int, bool) {
	if _, ok := tokens[want]; ok {
		if b := t.byToken[want]; !now.After(b.Expires) {
			return b, 1, true
		}
	}
	var only binding
	n := 0
	for tok := range tokens {
		if b := t.byToken[tok]; !now.After(b.Expires) {
			only = b
			n++
			if n > 1 {
				return binding{}, n, false
			}
		}
	}
	return only, n, n == 1
}

// sweep removes the bindings that expired before now and returns how many.
func (t *table) sweep(now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for tok, b := range t.byToken {
		if now.After(b.Expires) {
			t.unindex(b)
			delete(t.byToken, tok)
			n++
		}
	}
	return n
}

func (t *table) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byToken)
}
