package repl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/repl"
)

// store is a network function's state: key → value.
type store struct {
	mu    sync.Mutex
	m     map[string]string
	snaps atomic.Int32 // full copies taken
}

func (s *store) Apply(m repl.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m.Op {
	case repl.OpPut:
		var v string
		_ = json.Unmarshal(m.Data, &v)
		s.m[m.Key] = v
	case repl.OpDelete:
		delete(s.m, m.Key)
	}
}

func (s *store) Snapshot() []repl.Message {
	s.snaps.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []repl.Message
	for k, v := range s.m {
		b, _ := json.Marshal(v)
		out = append(out, repl.Message{Op: repl.OpPut, Key: k, Data: b})
	}
	return out
}

func (s *store) get() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for k, v := range s.m {
		out[k] = v
	}
	return out
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) { b.mu.Lock(); defer b.mu.Unlock(); return b.b.Write(p) }
func (b *syncBuf) String() string              { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

type member struct {
	st     *store
	events *syncBuf
	r      *repl.Replicator
	stop   func()
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer ln.Close()
	return ln.Addr().String()
}

// start runs a member; peers are name=ip:port.
func start(name, listen string, peers ...string) *member {
	cfg := repl.Config{Node: name, Listen: listen}
	for _, p := range peers {
		n, a, ok := strings.Cut(p, "=")
		Expect(ok).To(BeTrue(), "peer %q: want name=ip:port", p)
		cfg.PeerNames = append(cfg.PeerNames, n)
		cfg.Peers = append(cfg.Peers, a)
	}
	return startCfg(cfg)
}

func startCfg(cfg repl.Config) *member {
	m := &member{st: &store{m: map[string]string{}}, events: &syncBuf{}}
	var err error
	m.r, err = repl.New(cfg, m.st, obs.NewRecorder(m.events, cfg.Node), nil)
	Expect(err).NotTo(HaveOccurred())
	Expect(m.r.Listen()).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.r.Run(ctx) }()
	var once sync.Once
	m.stop = func() { once.Do(func() { cancel(); Eventually(done, 5*time.Second).Should(Receive(BeNil())) }) }
	DeferCleanup(m.stop)
	return m
}

func (m *member) put(k, v string) { m.st.Apply(putMsg(k, v)); m.r.Put(k, v) }

// sent counts a member's repl_send events of one op.
func sent(m *member, op string) int {
	n := 0
	for _, line := range strings.Split(m.events.String(), "\n") {
		if strings.Contains(line, `"kind":"repl_send"`) && strings.Contains(line, `"op":"`+op+`"`) {
			n++
		}
	}
	return n
}

func putMsg(k, v string) repl.Message {
	b, _ := json.Marshal(v)
	return repl.Message{Op: repl.OpPut, Key: k, Data: b}
}

var _ = Describe("Replicator", Label("integration"), func() {
	It("pushes puts and deletes to every peer, one repl_send event per message", SpecTimeout(20*time.Second), func(ctx SpecContext) {
		a1, a2, a3 := freeAddr(), freeAddr(), freeAddr()
		m1 := start("m1", a1, "m2="+a2, "m3="+a3)
		m2 := start("m2", a2, "m1="+a1, "m3="+a3)
		m3 := start("m3", a3, "m1="+a1, "m2="+a2)
		m1.put("user0001", "scscf1")
		m2.put("user0002", "scscf2")
		for _, m := range []*member{m1, m2, m3} {
			Eventually(m.st.get).Should(Equal(map[string]string{"user0001": "scscf1", "user0002": "scscf2"}))
		}
		m1.r.Delete("user0001")
		Eventually(m3.st.get).Should(Equal(map[string]string{"user0002": "scscf2"}))
		// Puts may also go out again in full copies (a peer's hello), so count the deletes exactly.
		Eventually(func() int { return sent(m1, "delete") }).Should(Equal(2), "one delete to each of two peers")
		Expect(sent(m1, "put")).To(BeNumerically(">=", 2))
		Expect(m1.events.String()).To(ContainSubstring(`"peer":"` + a2 + `"`))
		Expect(m1.events.String()).To(MatchRegexp(`"bytes":\d+`))
	})

	It("gives a member that starts (again) a full copy of a peer's state", SpecTimeout(20*time.Second), func(ctx SpecContext) {
		a1, a2 := freeAddr(), freeAddr()
		m1 := start("m1", a1, "m2="+a2)
		m1.put("user0001", "x")
		m1.put("user0002", "y")
		m2 := start("m2", a2, "m1="+a1) // after the changes: it missed them
		// The copy comes after a reconnect with back-off: allow for a loaded machine.
		Eventually(m2.st.get).WithTimeout(10 * time.Second).Should(Equal(map[string]string{"user0001": "x", "user0002": "y"}))
		m2.stop()
		m3 := start("m2", a2, "m1="+a1) // the same member, restarted
		Eventually(m3.st.get).WithTimeout(10 * time.Second).Should(Equal(map[string]string{"user0001": "x", "user0002": "y"}))
	})

	It("needs a listen address, peers and one name per peer", func() {
		_, err := repl.New(repl.Config{Node: "m1", Listen: "127.0.0.1:1"}, &store{}, nil, nil)
		Expect(err).To(MatchError(ContainSubstring("peers")))
		_, err = repl.New(repl.Config{Node: "m1", Listen: "127.0.0.1:1", Peers: []string{"127.0.0.1:2"}}, &store{}, nil, nil)
		Expect(err).To(MatchError("repl: peer_names: 0 names for 1 peers"))
		_, err = repl.New(repl.Config{Node: "m1", Listen: "127.0.0.1:1", Peers: []string{"127.0.0.1:2", "127.0.0.1:3"},
			PeerNames: []string{"m2", "m2"}}, &store{}, nil, nil)
		Expect(err).To(MatchError(ContainSubstring(`"m2" listed twice`)))
	})
})
