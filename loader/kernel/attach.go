package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/loctree/loctree/bpf"
)

// hook is one program and where it attaches.
type hook struct {
	name   string
	attach ebpf.AttachType
	prog   func(*bpf.Objects) *ebpf.Program
}

var hooks = []hook{
	// First: a socket the connect programs redirect once it is attached is
	// armed for its bytes (attached after them, the connections made in
	// between would be counted without their bytes).
	{"lt_sockops", ebpf.AttachCGroupSockOps, func(p *bpf.Objects) *ebpf.Program { return p.LtSockops }},
	{"lt_connect4", ebpf.AttachCGroupInet4Connect, func(p *bpf.Objects) *ebpf.Program { return p.LtConnect4 }},
	{"lt_connect6", ebpf.AttachCGroupInet6Connect, func(p *bpf.Objects) *ebpf.Program { return p.LtConnect6 }},
	{"lt_sendmsg4", ebpf.AttachCGroupUDP4Sendmsg, func(p *bpf.Objects) *ebpf.Program { return p.LtSendmsg4 }},
	{"lt_sendmsg6", ebpf.AttachCGroupUDP6Sendmsg, func(p *bpf.Objects) *ebpf.Program { return p.LtSendmsg6 }},
	{"lt_recvmsg4", ebpf.AttachCGroupUDP4Recvmsg, func(p *bpf.Objects) *ebpf.Program { return p.LtRecvmsg4 }},
	{"lt_recvmsg6", ebpf.AttachCGroupUDP6Recvmsg, func(p *bpf.Objects) *ebpf.Program { return p.LtRecvmsg6 }},
	{"lt_getpeername4", ebpf.AttachCgroupInet4GetPeername, func(p *bpf.Objects) *ebpf.Program { return p.LtGetpeername4 }},
	{"lt_getpeername6", ebpf.AttachCgroupInet6GetPeername, func(p *bpf.Objects) *ebpf.Program { return p.LtGetpeername6 }},
	{"lt_sock_release", ebpf.AttachCgroupInetSockRelease, func(p *bpf.Objects) *ebpf.Program { return p.LtSockRelease }},
}

func linkPin(dir, name string) string { return filepath.Join(dir, "link_"+name) }

// Attach attaches the programs to a cgroup v2 directory. With a bpffs dir
// the links are pinned and outlive the agent; links pinned by an earlier
// agent are re-adopted and switched to the new programs without a gap.
// It is all or nothing: when one hook fails, the links this call created
// are detached again and the error names the hook. Once every hook is
// attached, maps that replace pinned ones (Config.Replace) take their pins.
func (in *Installer) Attach(cgroup string) error {
	id, err := cgroupID(cgroup)
	if err != nil {
		return err
	}
	var created []attached
	for _, h := range hooks {
		a, err := in.attach(cgroup, id, h)
		if err != nil {
			return errors.Join(fmt.Errorf("attach %s to %s: %w", h.name, cgroup, err), in.detach(created))
		}
		if a.link != nil {
			created = append(created, a)
		}
	}
	return in.replacePins()
}

// attached is a link Attach created (nil for a re-adopted one) and its pin.
type attached struct {
	link link.Link
	pin  string
}

// detach undoes the links one Attach created, last first.
func (in *Installer) detach(created []attached) error {
	var errs []error
	for _, a := range slices.Backward(created) {
		if a.pin != "" {
			errs = append(errs, a.link.Unpin())
			delete(in.pins, a.pin)
		}
		errs = append(errs, a.link.Close())
		in.links = slices.DeleteFunc(in.links, func(l link.Link) bool { return l == a.link })
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("detach after a failed attach: %w", err)
	}
	return nil
}

func (in *Installer) attach(cgroup string, id uint64, h hook) (attached, error) {
	prog := h.prog(&in.k.objs)
	if in.k.pinned != "" {
		pin := linkPin(in.k.pinned, h.name)
		l, err := link.LoadPinnedLink(pin, nil)
		if err == nil {
			if err := readopt(l, id, prog); err != nil {
				l.Close()
				return attached{}, err
			}
			in.links = append(in.links, l) // held, so the path survives a lost pin
			in.pins[pin] = l
			return attached{}, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return attached{}, fmt.Errorf("%w: %w", ErrPinned, err)
		}
	}
	// Another agent's program on the same hook (one with other pins, or
	// none) would run beside ours, and the kernel's multi-attach order
	// decides whose tree a connect uses: refuse instead of serving a tree
	// nothing reads.
	if other, err := attachedProgram(cgroup, h); err != nil || other != "" {
		if err == nil {
			err = fmt.Errorf("%w: %s is already attached to %s by another agent (one with another --bpffs directory, or with none); stop it, or remove it with `loctree agent uninstall --cgroup %s --bpffs ITS_DIR`", ErrOtherAgent, other, cgroup, cgroup)
		}
		return attached{}, err
	}
	l, err := link.AttachCgroup(link.CgroupOptions{Path: cgroup, Attach: h.attach, Program: prog})
	if err != nil {
		return attached{}, err
	}
	in.links = append(in.links, l)
	if in.k.pinned == "" {
		return attached{link: l}, nil
	}
	pin := linkPin(in.k.pinned, h.name)
	if err := l.Pin(pin); err != nil {
		return attached{link: l}, errors.Join(err, in.detach([]attached{{link: l}}))
	}
	in.pins[pin] = l
	return attached{link: l, pin: pin}, nil
}

// readopt switches a pinned link to prog if it is attached to cgroup id.
func readopt(l link.Link, id uint64, prog *ebpf.Program) error {
	info, err := l.Info()
	if err != nil {
		return err
	}
	if cg := info.Cgroup(); cg == nil || cg.CgroupId != id {
		return fmt.Errorf("%w: the pinned link is attached to another cgroup; run `loctree agent uninstall` first", ErrPinned)
	}
	return l.Update(prog)
}

// pinnedMapNames are the pin names of every map of the programs, and of
// the generation map.
func pinnedMapNames() ([]string, error) {
	spec, err := bpf.Spec()
	if err != nil {
		return nil, err
	}
	names := []string{mapGeneration}
	for name := range spec.Maps {
		if !strings.HasPrefix(name, ".") { // .rodata and friends are never pinned
			names = append(names, name)
		}
	}
	return names, nil
}

// Uninstall detaches the programs and removes the pins in bpffsDir. Doing it
// twice is fine. With a cgroup it then checks that no loctree program is
// still attached there.
func Uninstall(cgroup, bpffsDir string) error {
	if _, err := os.Stat(bpffsDir); err == nil {
		lock, err := lockDir(bpffsDir)
		if err != nil {
			return err
		}
		defer lock.unlock()
	}
	var errs []error
	for _, h := range hooks {
		errs = append(errs, unpinLink(linkPin(bpffsDir, h.name)))
	}
	names, err := pinnedMapNames()
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := os.Remove(filepath.Join(bpffsDir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unpin %s: %w", name, err))
		}
	}
	_ = os.Remove(bpffsDir) // only if empty; a shared dir stays
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if cgroup == "" {
		return nil
	}
	return checkDetached(cgroup)
}

func unpinLink(path string) error {
	l, err := link.LoadPinnedLink(path, nil)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open pinned link %s: %w", path, err)
	}
	defer l.Close()
	if err := l.Unpin(); err != nil {
		return fmt.Errorf("unpin %s: %w", path, err)
	}
	return nil
}

// checkDetached fails if a program named lt_* is attached to cgroup.
func checkDetached(cgroup string) error {
	for _, h := range hooks {
		name, err := attachedProgram(cgroup, h)
		if err != nil {
			return err
		}
		if name != "" {
			return fmt.Errorf("program %s is still attached to %s (attached by another bpffs dir?)", name, cgroup)
		}
	}
	return nil
}

// attachedProgram is the name of a loctree program (named lt_*) attached to
// cgroup at h's hook, "" when there is none.
func attachedProgram(cgroup string, h hook) (string, error) {
	f, err := os.Open(cgroup)
	if err != nil {
		return "", fmt.Errorf("cgroup: %w", err)
	}
	defer f.Close()
	res, err := link.QueryPrograms(link.QueryOptions{Target: int(f.Fd()), Attach: h.attach})
	if err != nil {
		return "", fmt.Errorf("query %s: %w", cgroup, err)
	}
	for _, p := range res.Programs {
		prog, err := ebpf.NewProgramFromID(p.ID)
		if errors.Is(err, os.ErrPermission) {
			slog.Warn("cannot check whether another loctree program is attached: reading attached programs needs CAP_SYS_ADMIN",
				"cgroup", cgroup, "hook", h.name, "program_id", p.ID)
			continue
		}
		if err != nil {
			continue // detached or unloaded since the query
		}
		info, err := prog.Info()
		prog.Close()
		if err == nil && strings.HasPrefix(info.Name, "lt_") {
			return info.Name, nil
		}
	}
	return "", nil
}
