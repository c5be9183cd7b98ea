package fanout

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/loctree/loctree/internal/testing/realcp"
)

// Env is the variable that runs the measurement: the agent counts, e.g.
// LOCTREE_FANOUT=1,10,50.
const Env = "LOCTREE_FANOUT"

// The phases: idle after the first sync, then changes one EndpointSlice
// update each, changeGap apart.
const (
	idle      = 10 * time.Second
	changes   = 40
	changeGap = 300 * time.Millisecond
	settle    = 5 * time.Second // after stopping one set, before the next
)

// TestFanOut runs, for each N in $LOCTREE_FANOUT, N kube-proxy-like
// processes and then N loctree agents against one real API server holding
// 1,000 Services and 100,000 endpoints, and reports for each set: the
// first sync, the API server's CPU and memory, the time from an
// EndpointSlice write to every process having it, and the bytes the
// server sent each process per change. It needs root (the agents install
// into BPF maps, each in a cgroup and bpffs directory of its own) and the
// real control plane's binaries.
func TestFanOut(t *testing.T) {
	counts := agentCounts(t)
	realcp.Require(t)
	if os.Geteuid() != 0 {
		t.Fatal("needs root: each agent installs its tree into BPF maps")
	}
	dir := t.TempDir()
	loctree, baseline := buildBinaries(t, dir)
	cp := realcp.StartPrivate(t, realcp.Options{})
	admin := kubernetes.NewForConfigOrDie(cp.Admin())
	populate(t, admin, slices.Max(counts))
	kc := filepath.Join(dir, "kubeconfig")
	if err := realcp.WriteKubeconfig(cp.Admin(), kc); err != nil {
		t.Fatal(err)
	}
	cg, bpffs := mountFS(t, "cgroup2"), mountFS(t, "bpf")
	m := &meter{t: t, cp: cp, admin: admin}
	m.measureFloor()
	var rows []result
	for _, n := range counts {
		for _, k := range []kind{baselineKind(baseline, kc), agentKind(loctree, kc, cg, bpffs)} {
			rows = append(rows, m.run(k, n))
			time.Sleep(settle)
		}
	}
	printTable(t, rows)
}

func agentCounts(t *testing.T) []int {
	v := os.Getenv(Env)
	if v == "" {
		t.Skipf("a measurement, not a test: %s=1,10,50 runs it (root, the real control plane, minutes of every core)", Env)
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want counts like 1,10,50", Env, v)
		}
		out = append(out, n)
	}
	return out
}

func buildBinaries(t *testing.T, dir string) (loctree, baseline string) {
	t.Helper()
	loctree, baseline = filepath.Join(dir, "loctree"), filepath.Join(dir, "kubeproxylike")
	for bin, pkg := range map[string]string{loctree: "../../../cmd/loctree", baseline: "./kubeproxylike"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	return loctree, baseline
}

// mountFS mounts a file system of fstype (cgroup2, bpf) in a temporary
// directory until the test ends.
func mountFS(t *testing.T, fstype string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "loctree-fanout-"+fstype+"-")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(fstype, dir, fstype, 0, ""); err != nil {
		t.Fatalf("mount %s: %v", fstype, err)
	}
	t.Cleanup(func() {
		if fstype == "cgroup2" {
			removeChildren(dir)
		}
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
		os.Remove(dir)
	})
	return dir
}

func removeChildren(root string) {
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "agent-") {
			os.Remove(filepath.Join(root, e.Name()))
		}
	}
}

// meter runs one set of processes through the phases and measures them.
type meter struct {
	t     *testing.T
	cp    *realcp.ControlPlane
	admin kubernetes.Interface
	next  int           // the next service whose slice a change flips
	floor time.Duration // the API server's own CPU per second, with no process watching
}

// measureFloor is the API server's CPU per second over idle with no
// process of ours running: its own controllers and watch cache. The
// phases below subtract it for their length.
func (m *meter) measureFloor() {
	pid := m.cp.APIServerPID()
	before := mustUsage(m.t, pid)
	time.Sleep(idle)
	m.floor = (mustUsage(m.t, pid).cpu - before.cpu) / time.Duration(idle/time.Second)
	m.t.Logf("API server alone: %v CPU per second", m.floor)
}

// less is cpu less the floor for d.
func (m *meter) less(cpu, d time.Duration) time.Duration {
	return cpu - m.floor*d/time.Second
}

// result is one set's measurements.
type result struct {
	kind                 string
	n                    int
	syncP50, syncMax     time.Duration // process start → first full state
	syncCPU              time.Duration // API server CPU until every process synced, less the floor
	idleCPU              time.Duration // API server CPU per second idle, less the floor: the processes' watches
	apiRSS               int64         // API server RSS after the sync
	procRSS              int64         // mean RSS of a process after the changes
	changeP50, changeP99 time.Duration // write → one process has it (N × changes samples)
	allP50, allP99       time.Duration // write → every process has it (changes samples)
	changeCPU            time.Duration // API server CPU per change, less its idle cost
	bytesPerChange       float64       // bytes a process read per change (its socket's TLS records), less its idle reads
	procCPU              time.Duration // a process's own CPU per change
	reconnects           int           // watches that ended with an error, all processes together
	firstReconnect       string        // the log line of the first
}

func (m *meter) run(k kind, n int) result {
	t := m.t
	t.Helper()
	pid := m.cp.APIServerPID()
	r := result{kind: k.name, n: n}
	before, began := mustUsage(t, pid), time.Now()
	procs := start(t, k, n, keepLine)
	m.awaitSync(k, procs, &r)
	synced := mustUsage(t, pid)
	r.syncCPU, r.apiRSS = m.less(synced.cpu-before.cpu, time.Since(began)), synced.rss
	read0 := m.read(procs)
	time.Sleep(idle)
	idled, read1, changing := mustUsage(t, pid), m.read(procs), time.Now()
	own0 := m.cpu(procs)
	perSecond := (idled.cpu - synced.cpu) / time.Duration(idle/time.Second) // floor and the processes' watches
	r.idleCPU = perSecond - m.floor
	m.changes(k, procs, &r)
	took := time.Since(changing)
	r.procCPU = (m.cpu(procs) - own0) / time.Duration(n*changes)
	// less what the processes cost the server and read while idle, for as long
	// as the changes took: pings, bookmarks
	r.changeCPU = (mustUsage(t, pid).cpu - idled.cpu - perSecond*took/time.Second) / changes
	idleRead := float64(read1-read0) / idle.Seconds()
	r.bytesPerChange = (float64(m.read(procs)-read1) - idleRead*took.Seconds()) / float64(n*changes)
	for _, p := range procs {
		r.procRSS += mustUsage(t, p.cmd.Process.Pid).rss / int64(n)
	}
	r.reconnects, r.firstReconnect = reconnects(procs)
	for _, p := range procs {
		p.stop()
	}
	t.Logf("%s × %d: %+v", k.name, n, r)
	return r
}

func mustUsage(t *testing.T, pid int) usage {
	t.Helper()
	u, err := procUsage(pid)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func (m *meter) awaitSync(k kind, procs []*proc, r *result) {
	var took []time.Duration
	for _, p := range procs {
		at, err := p.await(p.started, 10*time.Minute, k.synced)
		if err != nil {
			m.t.Fatalf("%s: first sync: %v", k.name, err)
		}
		took = append(took, at.Sub(p.started))
	}
	slices.Sort(took)
	r.syncP50, r.syncMax = took[len(took)/2], took[len(took)-1]
}

// changes flips one slice at a time and times its arrival at every process.
func (m *meter) changes(k kind, procs []*proc, r *result) {
	t := m.t
	var each, all []time.Duration
	for range changes {
		s := m.next % services
		m.next++
		written := time.Now()
		rv, err := flip(context.Background(), m.admin, s)
		if err != nil {
			t.Fatal(err)
		}
		var last time.Duration
		for _, p := range procs {
			at, err := p.await(written, 30*time.Second, func(line string) bool { return k.changed(line, rv) })
			if err != nil {
				t.Fatalf("%s: change %d: %v", k.name, s, err)
			}
			each = append(each, at.Sub(written))
			last = max(last, at.Sub(written))
		}
		all = append(all, last)
		time.Sleep(changeGap)
	}
	r.changeP50, r.changeP99 = pct(each, 50), pct(each, 99)
	r.allP50, r.allP99 = pct(all, 50), pct(all, 99)
}

// cpu is the CPU time the processes have used, together.
func (m *meter) cpu(procs []*proc) time.Duration {
	var d time.Duration
	for _, p := range procs {
		d += mustUsage(m.t, p.cmd.Process.Pid).cpu
	}
	return d
}

// read is the bytes the processes have read, together.
func (m *meter) read(procs []*proc) int64 {
	var n int64
	for _, p := range procs {
		n += mustUsage(m.t, p.cmd.Process.Pid).read
	}
	return n
}

func pct(l []time.Duration, p int) time.Duration {
	slices.Sort(l)
	return l[min(len(l)-1, len(l)*p/100)]
}

func printTable(t *testing.T, rows []result) {
	var b strings.Builder
	b.WriteString("\n| set | N | first sync p50 / max | API server CPU: sync | idle /s | per change | API server RSS | process RSS | write → one p50 / p99 | write → all N p50 / p99 | bytes read / process / change | process CPU / change | watches ended by an error |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %v / %v | %.2f s | %.0f ms | %.1f ms | %d MiB | %d MiB | %v / %v | %v / %v | %.0f | %.1f ms | %d |\n",
			r.kind, r.n, r.syncP50.Round(10*time.Millisecond), r.syncMax.Round(10*time.Millisecond), r.syncCPU.Seconds(),
			float64(r.idleCPU.Milliseconds()), float64(r.changeCPU.Microseconds())/1000, r.apiRSS>>20, r.procRSS>>20,
			r.changeP50.Round(time.Millisecond), r.changeP99.Round(time.Millisecond), r.allP50.Round(time.Millisecond), r.allP99.Round(time.Millisecond),
			r.bytesPerChange, float64(r.procCPU.Microseconds())/1000, r.reconnects)
	}
	t.Log(b.String())
}
