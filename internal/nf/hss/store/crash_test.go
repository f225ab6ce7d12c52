package store_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/nf/hss/store"
)

// The crash test re-executes this test binary as a writer process (TestCrashHelper, selected with -test.run and
// enabled by crashDirEnv), kills it with SIGKILL while it is writing, and checks every acknowledged write.

const (
	crashDirEnv  = "QUASIPOOL_STORE_CRASH_DIR"
	crashSubs    = 64
	crashWorkers = 16
)

// TestCrashHelper is the child process: it increments the counters of crashSubs subscribers from crashWorkers
// goroutines forever and prints "ack <impi> <n>" after each Update returns. Without crashDirEnv it does nothing.
func TestCrashHelper(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("only runs as the crash test's child process")
	}
	db, err := store.Open(dir, store.Options{}) // fsync on: the production setting
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(2)
	}
	var out sync.Mutex
	for w := range crashWorkers {
		go func() {
			for i := w; ; i = (i + crashWorkers) % crashSubs {
				impi := crashIMPI(i)
				reg, err := db.Update(context.Background(), impi, increment)
				out.Lock()
				if err != nil {
					fmt.Printf("error %s: %v\n", impi, err)
				} else {
					fmt.Printf("ack %s %s\n", impi, reg.Restoration) // one write(2) to the pipe per line
				}
				out.Unlock()
			}
		}()
	}
	select {} // until SIGKILL
}

func crashIMPI(i int) string { return fmt.Sprintf("crash%02d@ims.test", i+1) }

var _ = Describe("crash", Label("integration"), func() {
	It("keeps every acknowledged write after SIGKILL", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		db, err := store.Open(dir, store.Options{})
		Expect(err).NotTo(HaveOccurred())
		_, _, err = db.Import(ctx, store.Generate("crash", 1, crashSubs, 2, "ims.test", "p"))
		Expect(err).NotTo(HaveOccurred())
		Expect(db.Close()).To(Succeed())

		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
		cmd.Stderr = GinkgoWriter
		stdout, err := cmd.StdoutPipe()
		Expect(err).NotTo(HaveOccurred())
		Expect(cmd.Start()).To(Succeed())
		DeferCleanup(func() { _ = cmd.Process.Kill() }) // in case the spec fails before the kill

		// Read acknowledgements until EOF: lines still in the pipe after the kill were acknowledged too.
		var (
			mu      sync.Mutex
			acked   = map[string]int{} // impi → highest acknowledged counter
			nAcks   int
			errs    []string
			readErr = make(chan error, 1)
		)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				mu.Lock()
				switch {
				case len(f) == 3 && f[0] == "ack":
					n, err := strconv.Atoi(f[2])
					if err != nil {
						errs = append(errs, sc.Text())
					}
					acked[f[1]] = max(acked[f[1]], n)
					nAcks++
				case len(f) > 0 && f[0] == "error":
					errs = append(errs, sc.Text())
				}
				mu.Unlock()
			}
			readErr <- sc.Err()
		}()
		acks := func() int { mu.Lock(); defer mu.Unlock(); return nAcks }

		Eventually(acks).WithContext(ctx).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 1500))
		Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		Eventually(readErr).WithContext(ctx).Should(Receive(BeNil()))
		err = cmd.Wait()
		Expect(err).To(HaveOccurred())
		Expect(err.(*exec.ExitError).Sys().(syscall.WaitStatus).Signal()).To(Equal(syscall.SIGKILL))

		mu.Lock()
		defer mu.Unlock()
		Expect(errs).To(BeEmpty())
		GinkgoWriter.Printf("child acknowledged %d updates before SIGKILL\n", nAcks)

		db, err = store.Open(dir, store.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(db.Close)
		for i := range crashSubs {
			impi := crashIMPI(i)
			reg, err := db.GetRegistration(impi)
			Expect(err).NotTo(HaveOccurred())
			// Each IMPI has one writer, so at most one unacknowledged update can have reached the disk.
			Expect(counter(reg)).To(SatisfyAll(
				BeNumerically(">=", acked[impi]),
				BeNumerically("<=", acked[impi]+1),
			), impi)
		}
	}, SpecTimeout(time.Minute))
})
