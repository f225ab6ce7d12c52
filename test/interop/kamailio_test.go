package interop_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/template"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
)

// The Kamailio modules the configs in kamailio/ load; the Debian packages kamailio, kamailio-ims-modules and
// kamailio-presence-modules install them.
var kamailioModules = []string{"ims_icscf.so", "ims_registrar_scscf.so", "ims_usrloc_scscf.so", "ims_auth.so",
	"ims_dialog.so", "cdp.so", "cdp_avp.so", "db_text.so", "presence.so"}

// moduleDirs are where distributions put Kamailio's modules.
var moduleDirs = []string{"/usr/lib/x86_64-linux-gnu/kamailio/modules", "/usr/lib/aarch64-linux-gnu/kamailio/modules",
	"/usr/lib64/kamailio/modules", "/usr/lib/kamailio/modules", "/usr/local/lib64/kamailio/modules"}

// checkKamailio returns the kamailio binary, or an error naming what is missing.
func checkKamailio() (string, error) {
	bin, err := exec.LookPath("kamailio")
	if err != nil {
		return "", errors.New("kamailio not installed (apt-get install kamailio kamailio-ims-modules kamailio-presence-modules)")
	}
	for _, d := range moduleDirs {
		missing := []string{}
		for _, m := range kamailioModules {
			if _, err := os.Stat(filepath.Join(d, m)); err != nil {
				missing = append(missing, m)
			}
		}
		if len(missing) == 0 {
			return bin, nil
		}
		if len(missing) < len(kamailioModules) {
			return "", fmt.Errorf("kamailio modules missing in %s: %s (apt-get install kamailio-ims-modules kamailio-presence-modules)",
				d, strings.Join(missing, ", "))
		}
	}
	return "", errors.New("kamailio's IMS modules not found (apt-get install kamailio-ims-modules kamailio-presence-modules)")
}

// require skips the running spec when a tool is missing, or fails it when env is set (.ci/run sets the
// IMSLAB_REQUIRE_* variables after installing the tools).
func require(err error, env string) {
	GinkgoHelper()
	if err == nil {
		return
	}
	if os.Getenv(env) != "" {
		Fail(err.Error() + " and " + env + " is set")
	}
	Skip(err.Error())
}

// cscf is the data of one Kamailio CSCF's templates (kamailio/*.cfg, *.xml, icscf-db/*).
type cscf struct {
	Name         string // "icscf" or "scscf": the template set and the log prefix
	Debug        int    // Kamailio's debug level (2: info)
	IP           string
	SIPPort      int
	Domain       string // the home domain, an alias of the CSCF
	Realm        string // the Diameter realm
	OriginHost   string // cdp's FQDN, which the HSS's peer list names
	HSSHost      string // the HSS's FQDN as cdp resolves it
	HSSPort      int
	AcceptorPort int // cdp's own Diameter listener
	CDPConfig    string
	// S-CSCF only.
	ServerName string // Server-Name of MAR and SAR
	Algorithm  string // ims_auth's registration_default_algorithm
	ICSCF      string // host:port the originating S-CSCF sends initial requests to
	XSD        string
	// I-CSCF only.
	DBDir     string
	SCSCFName string // the S-CSCF in the db_text table s_cscf
	SCSCFURI  string
}

// dbtext escapes a db_text column value (':' separates columns).
func dbtext(s string) string { return strings.ReplaceAll(s, ":", `\:`) }

// render writes the CSCF's kamailio.cfg, cdp XML and (I-CSCF) db_text tables into dir from the templates in
// kamailio/, and returns the path of the kamailio.cfg.
func (c *cscf) render(dir string) string {
	GinkgoHelper()
	src, err := filepath.Abs("kamailio")
	Expect(err).NotTo(HaveOccurred())
	c.CDPConfig = filepath.Join(dir, c.Name+".xml")
	c.XSD = filepath.Join(src, "CxDataType_Rel7.xsd")
	if c.Name == "icscf" {
		c.DBDir = filepath.Join(dir, "icscf-db")
		Expect(os.MkdirAll(c.DBDir, 0o755)).To(Succeed())
		tables, err := filepath.Glob(filepath.Join(src, "icscf-db", "*"))
		Expect(err).NotTo(HaveOccurred())
		Expect(tables).NotTo(BeEmpty())
		for _, t := range tables {
			c.write(t, filepath.Join(c.DBDir, filepath.Base(t)))
		}
	}
	c.write(filepath.Join(src, c.Name+".xml"), c.CDPConfig)
	cfg := filepath.Join(dir, c.Name+".cfg")
	c.write(filepath.Join(src, c.Name+".cfg"), cfg)
	return cfg
}

func (c *cscf) write(tmpl, out string) {
	GinkgoHelper()
	t, err := template.New(filepath.Base(tmpl)).Funcs(template.FuncMap{"dbtext": dbtext}).Option("missingkey=error").ParseFiles(tmpl)
	Expect(err).NotTo(HaveOccurred())
	f, err := os.Create(out)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	Expect(t.Execute(f, c)).To(Succeed(), "template %s", tmpl)
}

// startKamailio checks the configuration with kamailio -c, then runs it in the foreground (-DD) in its own
// process group, logging to log. The cleanup stops the whole group (Kamailio forks its workers).
func startKamailio(bin, cfg, log string) *gexec.Session {
	GinkgoHelper()
	if out, err := exec.Command(bin, "-c", "-f", cfg).CombinedOutput(); err != nil {
		Fail(fmt.Sprintf("kamailio -c -f %s: %v\n%s", cfg, err, out))
	}
	run := filepath.Join(filepath.Dir(cfg), strings.TrimSuffix(filepath.Base(cfg), ".cfg")+"-run")
	Expect(os.MkdirAll(run, 0o755)).To(Succeed())
	f, err := os.Create(log)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(bin, "-DD", "-E", "-f", cfg, "-Y", run, "-P", filepath.Join(run, "kamailio.pid"), "-w", run)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s, err := gexec.Start(cmd, f, f)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		pid := cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-s.Exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-s.Exited
		}
		f.Close()
	})
	return s
}
