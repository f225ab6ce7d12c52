package compose_test

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.yaml.in/yaml/v3"

	"github.com/imslab/quasipool/internal/harness/compose"
	"github.com/imslab/quasipool/internal/topology"
)

// fakeEngine answers the few Docker Engine API calls CleanProjects makes, from lists of containers and networks,
// on a unix socket of its own: no Docker is touched.
type fakeEngine struct {
	mu         sync.Mutex
	containers []map[string]any
	networks   []map[string]any
	deleted    []string // "containers/<id>", "networks/<id>"
}

func (f *fakeEngine) serve(sock string) *http.Server {
	GinkgoHelper()
	ln, err := net.Listen("unix", sock)
	Expect(err).NotTo(HaveOccurred())
	srv := &http.Server{Handler: http.HandlerFunc(f.handle)}
	go func() { _ = srv.Serve(ln) }()
	DeferCleanup(srv.Close)
	return srv
}

func (f *fakeEngine) handle(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := strings.TrimPrefix(r.URL.Path, "/v1.41/")
	switch {
	case p == "_ping":
		_, _ = w.Write([]byte("OK"))
	case r.Method == http.MethodGet && (p == "containers/json" || p == "networks"):
		var filt map[string][]string
		_ = json.Unmarshal([]byte(r.URL.Query().Get("filters")), &filt)
		list := f.containers
		if p == "networks" {
			list = f.networks
		}
		out := []map[string]any{}
		for _, o := range list {
			labels := o["Labels"].(map[string]string)
			keep := true
			for _, l := range filt["label"] {
				if _, ok := labels[l]; !ok {
					keep = false
				}
			}
			if keep {
				out = append(out, o)
			}
		}
		_ = json.NewEncoder(w).Encode(out)
	case r.Method == http.MethodDelete:
		what, id, _ := strings.Cut(p, "/")
		list := &f.containers
		if what == "networks" {
			list = &f.networks
		}
		i := slices.IndexFunc(*list, func(o map[string]any) bool { return o["Id"] == id })
		if i < 0 {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"no such object"}`))
			return
		}
		*list = slices.Delete(*list, i, i+1)
		f.deleted = append(f.deleted, what+"/"+id)
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (f *fakeEngine) ids(list []map[string]any) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, o := range list {
		out = append(out, o["Id"].(string))
	}
	return out
}

// project adds a compose project's two containers and one network with the labels.
func (f *fakeEngine) project(name string, labels map[string]string) {
	l := map[string]string{"com.docker.compose.project": name}
	for k, v := range labels {
		l[k] = v
	}
	for _, svc := range []string{"dnsd", "pcscf1"} {
		f.containers = append(f.containers, map[string]any{"Id": name + "-" + svc, "Names": []string{"/" + name + "-" + svc + "-1"},
			"Labels": l})
	}
	f.networks = append(f.networks, map[string]any{"Id": name + "-net", "Name": name + "_core", "Labels": l})
}

var _ = Describe("imslab clean's compose part (a fake engine, no Docker)", Label("unit"), func() {
	var (
		eng  *fakeEngine
		sock string
	)
	BeforeEach(func() {
		dir, err := os.MkdirTemp("", "eng") // a short path: unix socket paths are limited to 108 bytes
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		sock = filepath.Join(dir, "docker.sock")
		eng = &fakeEngine{}
	})

	It("removes the projects of dead owners only, and leaves live, foreign and unlabelled ones", func(ctx SpecContext) {
		host, _ := os.Hostname()
		mine := compose.OwnerLabels("/runs/live") // this process: alive
		Expect(mine).To(HaveKeyWithValue(compose.LabelOwnerPID, strconv.Itoa(os.Getpid())))
		Expect(mine).To(HaveKey(compose.LabelOwnerStart))
		dead := map[string]string{compose.LabelOwnerPID: "2147483646", compose.LabelOwnerStart: "12", compose.LabelOwnerHost: host}
		reused := map[string]string{compose.LabelOwnerPID: strconv.Itoa(os.Getpid()), compose.LabelOwnerStart: "1",
			compose.LabelOwnerHost: host} // our pid, another start time: a reused pid, its owner is gone
		foreign := map[string]string{compose.LabelOwnerPID: "2147483646", compose.LabelOwnerStart: "12",
			compose.LabelOwnerHost: host + "-elsewhere"}
		eng.project("imslab-live", mine)
		eng.project("imslab-dead", dead)
		eng.project("imslab-reused", reused)
		eng.project("imslab-foreign", foreign)
		eng.project("imslab-old", nil)                                                         // no owner labels: before the labels, or not ours
		eng.project("someone-else", nil)                                                       // not imslab's at all
		eng.containers = append(eng.containers, map[string]any{"Id": "loose", "Labels": dead}) // owner labels, no project
		eng.serve(sock)

		res, err := compose.CleanProjects(ctx, compose.NewEngineAt(sock), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Removed).To(Equal([]string{"imslab-dead", "imslab-reused"}))
		Expect(res.Live).To(Equal([]string{"imslab-live"}))
		Expect(res.Foreign).To(Equal([]string{"imslab-foreign"}))
		Expect(res.Containers).To(ConsistOf("imslab-dead-dnsd-1", "imslab-dead-pcscf1-1", "imslab-reused-dnsd-1",
			"imslab-reused-pcscf1-1"))
		Expect(res.Networks).To(ConsistOf("imslab-dead_core", "imslab-reused_core"))
		Expect(eng.ids(eng.containers)).To(ConsistOf("imslab-live-dnsd", "imslab-live-pcscf1", "imslab-foreign-dnsd",
			"imslab-foreign-pcscf1", "imslab-old-dnsd", "imslab-old-pcscf1", "someone-else-dnsd", "someone-else-pcscf1", "loose"))
		Expect(eng.ids(eng.networks)).To(ConsistOf("imslab-live-net", "imslab-foreign-net", "imslab-old-net", "someone-else-net"))
		i := slices.Index(eng.deleted, "containers/imslab-dead-dnsd")
		j := slices.Index(eng.deleted, "networks/imslab-dead-net")
		Expect(i).To(BeNumerically("<", j), "containers before their network")
		Expect(res.String()).To(And(ContainSubstring("removed 2 compose project(s) (imslab-dead, imslab-reused)"),
			ContainSubstring("left 1 of a live run (imslab-live)"), ContainSubstring("owned on another host (imslab-foreign)")))

		res, err = compose.CleanProjects(ctx, compose.NewEngineAt(sock), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Removed).To(BeEmpty())
		Expect(res.String()).To(HavePrefix("no compose project left behind"))
	})

	It("removes a crashed run's network when its containers were never created", func(ctx SpecContext) {
		host, _ := os.Hostname()
		eng.networks = append(eng.networks, map[string]any{"Id": "n1", "Name": "imslab-abc_access", "Labels": map[string]string{
			"com.docker.compose.project": "imslab-abc", compose.LabelOwnerPID: "2147483646", compose.LabelOwnerStart: "5",
			compose.LabelOwnerHost: host}})
		eng.serve(sock)
		res, err := compose.CleanProjects(ctx, compose.NewEngineAt(sock), func(int, uint64) bool { return false })
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Networks).To(Equal([]string{"imslab-abc_access"}))
		Expect(eng.networks).To(BeEmpty())
	})

	It("says there is no engine when none answers, and removes nothing", func(ctx SpecContext) {
		_, err := compose.CleanProjects(ctx, compose.NewEngineAt(sock), nil) // nothing listens
		Expect(errors.Is(err, compose.ErrNoEngine)).To(BeTrue(), "%v", err)
	})

	It("labels every service and network of a generated lab with the owner labels, and the committed lab with none", func() {
		t := topology.Default()
		labels := compose.OwnerLabels("/runs/x")
		b, err := compose.Generate(t, compose.Options{Labels: labels})
		Expect(err).NotTo(HaveOccurred())
		var doc struct {
			Services map[string]struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"services"`
			Networks map[string]struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"networks"`
		}
		Expect(yaml.Unmarshal(b.Compose, &doc)).To(Succeed())
		Expect(doc.Services).NotTo(BeEmpty())
		for name, s := range doc.Services {
			Expect(s.Labels).To(Equal(labels), name)
		}
		Expect(doc.Networks).To(HaveLen(3))
		for name, n := range doc.Networks {
			Expect(n.Labels).To(Equal(labels), name)
		}
		b, err = compose.Generate(t, compose.DefaultOptions())
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b.Compose)).NotTo(ContainSubstring("io.imslab.owner"))
	})
})
