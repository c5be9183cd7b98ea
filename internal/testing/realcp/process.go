package realcp

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// launcher starts processes from one goroutine locked to its OS thread for
// the control plane's life: their parent-death signal (SIGKILL) is tied to
// that thread, so they die with the test binary even when a test never
// stops them, and never because some other goroutine's locked thread ended.
type launcher struct{ reqs chan launch }

type launch struct {
	cmd  *exec.Cmd
	done chan error
}

func newLauncher() *launcher {
	l := &launcher{reqs: make(chan launch)}
	go l.loop()
	return l
}

// loop never unlocks its thread: when close ends it, the thread exits and
// any child still running gets SIGKILL.
func (l *launcher) loop() {
	runtime.LockOSThread()
	for r := range l.reqs {
		r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		r.done <- r.cmd.Start()
	}
}

func (l *launcher) close() { close(l.reqs) }

// process is one running binary and its log file.
type process struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{} // closed when the process has exited
	err    error         // its Wait error, once exited is closed
}

func (l *launcher) start(name, bin, logPath string, args ...string) (*process, error) {
	return l.startEnv(name, nil, bin, logPath, args...)
}

// startEnv starts bin with env added to the test binary's environment.
func (l *launcher) startEnv(name string, env []string, bin, logPath string, args ...string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	done := make(chan error, 1)
	l.reqs <- launch{cmd: cmd, done: done}
	if err := <-done; err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
func (p *process) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.kill()
	}
}

// kill sends SIGKILL and waits for the exit.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// running reports an error if the process has exited, with the end of its log.
func (p *process) running() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited (%v); end of %s:\n%s", p.name, p.err, p.log, tail(p.log, 2000))
	default:
		return nil
	}
}

// tail is the last n bytes of a file.
func tail(path string, n int64) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if int64(len(data)) > n {
		data = data[int64(len(data))-n:]
	}
	return string(data)
}

var errNotReady = errors.New("not ready")
