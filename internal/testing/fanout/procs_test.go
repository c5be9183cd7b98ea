package fanout

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// kind is what runs on each simulated node: the agent or the baseline.
type kind struct {
	name string
	// args are the command line of process i.
	args func(i int) ([]string, error)
	// synced and changed recognise a line saying the first state arrived,
	// and that the change to resource version rv arrived.
	synced  func(line string) bool
	changed func(line, rv string) bool
}

// stamped is a line of a process's output and when it was read.
type stamped struct {
	at   time.Time
	line string
}

// proc is one running process and the lines of its output that matter.
type proc struct {
	cmd     *exec.Cmd
	started time.Time
	mu      sync.Mutex
	lines   []stamped
	more    chan struct{}
	done    chan struct{}
}

// start starts n processes of k, killed when the test ends.
func start(t *testing.T, k kind, n int, keep func(string) bool) []*proc {
	t.Helper()
	procs := make([]*proc, n)
	for i := range n {
		args, err := k.args(i)
		if err != nil {
			t.Fatal(err)
		}
		p, err := startProc(args, keep)
		if err != nil {
			t.Fatal(err)
		}
		procs[i] = p
		t.Cleanup(p.stop)
	}
	return procs
}

func startProc(args []string, keep func(string) bool) (*proc, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	p := &proc{cmd: cmd, more: make(chan struct{}, 1), done: make(chan struct{})}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", args[0], err)
	}
	go p.read(out, keep)
	return p, nil
}

// read keeps the lines keep wants, stamped as they arrive.
func (p *proc) read(out io.Reader, keep func(string) bool) {
	defer close(p.done)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); keep(line) {
			p.mu.Lock()
			p.lines = append(p.lines, stamped{time.Now(), line})
			p.mu.Unlock()
			select {
			case p.more <- struct{}{}:
			default:
			}
		}
	}
}

// await returns when the first line after `after` that ok accepts arrived.
func (p *proc) await(after time.Time, within time.Duration, ok func(string) bool) (time.Time, error) {
	deadline := time.After(within)
	for {
		p.mu.Lock()
		for _, l := range p.lines {
			if !l.at.Before(after) && ok(l.line) {
				p.mu.Unlock()
				return l.at, nil
			}
		}
		p.mu.Unlock()
		select {
		case <-p.more:
		case <-p.done:
			return time.Time{}, fmt.Errorf("pid %d exited: %v", p.cmd.Process.Pid, p.cmd.Wait())
		case <-deadline:
			return time.Time{}, fmt.Errorf("pid %d: nothing within %v", p.cmd.Process.Pid, within)
		}
	}
}

// stop sends SIGTERM, then SIGKILL after 10 s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = p.cmd.Wait()
}

// agentKind runs `loctree agent --source kubernetes` as node-i, in a
// cgroup and a bpffs directory of its own.
func agentKind(loctree, kubeconfig, cgroupRoot, bpffs string) kind {
	return kind{
		name: "agent",
		args: func(i int) ([]string, error) {
			cg := filepath.Join(cgroupRoot, fmt.Sprintf("agent-%d", i))
			if err := os.MkdirAll(cg, 0o755); err != nil {
				return nil, err
			}
			return []string{loctree, "agent", "--source", "kubernetes", "--kubeconfig", kubeconfig, "--node", nodeName(i),
				"--cgroup", cg, "--bpffs", filepath.Join(bpffs, fmt.Sprintf("agent-%d", i)), "--listen", ""}, nil
		},
		synced:  func(line string) bool { return strings.Contains(line, `msg="tree installed"`) },
		changed: func(line, _ string) bool { return strings.Contains(line, `msg="tree installed"`) },
	}
}

// baselineKind runs kubeproxylike as node-i.
func baselineKind(bin, kubeconfig string) kind {
	return kind{
		name: "kube-proxy-like",
		args: func(i int) ([]string, error) {
			return []string{bin, "--kubeconfig", kubeconfig, "--node", nodeName(i)}, nil
		},
		synced: func(line string) bool { return line == "synced" },
		changed: func(line, rv string) bool {
			return strings.HasPrefix(line, "slice ") && strings.HasSuffix(line, " "+rv)
		},
	}
}

// keepLine: the lines either kind's synced or changed may look for.
func keepLine(line string) bool {
	return line == "synced" || strings.HasPrefix(line, "slice ") || strings.Contains(line, `msg="tree installed"`) ||
		strings.Contains(line, "level=ERROR") || reconnect(line)
}

// reconnect: client-go's Reflector logs a watch that ended with an error
// (a lost connection among them); both kinds log it.
func reconnect(line string) bool { return strings.Contains(line, "watch ended with error") }

// reconnects counts the reconnect lines of every process, and returns
// the first.
func reconnects(procs []*proc) (int, string) {
	n, first := 0, ""
	for _, p := range procs {
		p.mu.Lock()
		for _, l := range p.lines {
			if reconnect(l.line) {
				n++
				first = cmp.Or(first, l.line)
			}
		}
		p.mu.Unlock()
	}
	return n, first
}
