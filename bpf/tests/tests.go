// Package tests holds the test-only BPF programs (lookuptest.c) and their
// bindings. They run the kernel's lookup and pick (bpf/lib) through
// BPF_PROG_TEST_RUN on the agent's maps. Only tests import this package, so
// the programs are neither exported by the production bpf package nor
// embedded in the loctree binary (cilium/ebpf keeps its test programs apart
// the same way, under testdata/). Importers name it bpftest.
package tests

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -mcpu=v3 -Wall -Werror -I.. -I../include" -target bpfel -type lt_test_args -type lt_test_hammer_out -type lt_test_stale_in -type lt_test_stale_out -type lt_test_jump_args -type lt_test_loads_out -type lt_test_bench_args -type lt_test_src lookuptest lookuptest.c

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
)

type (
	// Args is the context of the lookup and hammer programs.
	Args = lookuptestLtTestArgs
	// HammerOut is what the hammer program counts.
	HammerOut = lookuptestLtTestHammerOut
	// StaleIn is the input of the stale-walk program.
	StaleIn = lookuptestLtTestStaleIn
	// StaleOut is what the stale-walk program counts.
	StaleOut = lookuptestLtTestStaleOut
	// Jump is the input and output of the consistent_hash first-pick program.
	Jump = lookuptestLtTestJumpArgs
	// LoadsOut is what the loads program writes.
	LoadsOut = lookuptestLtTestLoadsOut
	// BenchArgs is the context of the benchmark programs, and what they write.
	BenchArgs = lookuptestLtTestBenchArgs
	// BenchSource is one source's labels (one per scope) for the benchmark programs.
	BenchSource = lookuptestLtTestSrc
	// Objects are the loaded test programs.
	Objects = lookuptestObjects
)

// StatusNoService is Args.Status when the frontend has no service.
const StatusNoService = 100

// Load loads the test programs on the maps of objs (the agent's).
func Load(objs *bpf.Objects) (*Objects, error) {
	spec, err := loadLookuptest()
	if err != nil {
		return nil, fmt.Errorf("bpf tests: %w", err)
	}
	repl := map[string]*ebpf.Map{
		bpf.MapFrontends: objs.LtFrontends, bpf.MapNodes: objs.LtNodes, bpf.MapEndpoints: objs.LtEndpoints,
		bpf.MapConns: objs.LtConns, bpf.MapRR: objs.LtRr, bpf.MapStats: objs.LtStats, bpf.MapCgroupSrc: objs.LtCgroupSrc,
		bpf.MapCgroupLevels: objs.LtCgroupLevels, bpf.MapAffinity: objs.LtAffinity, bpf.MapAffinityEps: objs.LtAffEps,
	}
	for name, m := range repl {
		if ms, ok := spec.Maps[name]; ok {
			ms.MaxEntries = m.MaxEntries()
		} else {
			delete(repl, name)
		}
	}
	var out Objects
	if err := spec.LoadAndAssign(&out, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		return nil, fmt.Errorf("bpf tests: load: %w", err)
	}
	return &out, nil
}

// NewArgs is the input of the lookup and hammer programs: a service's
// frontend, the source's labels (one per scope) and, for the hammer, how
// many lookups one run does.
func NewArgs(fe bpf.Frontend, labels [8]uint64, loops uint32) Args {
	return Args{Fe: addrOf(fe), Labels: labels, Loops: loops}
}

// NewCgroupArgs is the input of the lookup program taking the source from
// the cgroup locality map entry of cgroup.
func NewCgroupArgs(fe bpf.Frontend, cgroup uint64) Args {
	return Args{Fe: addrOf(fe), UseCgroup: 1, Cgroup: cgroup}
}

// NewStaleIn is the input of the stale-walk program: the service, the port
// every one of its endpoints has (host byte order), the source labels and
// the walks per run.
func NewStaleIn(fe bpf.Frontend, port uint16, labels [8]uint64, loops uint32) StaleIn {
	return StaleIn{Fe: addrOf(fe), Port: port<<8 | port>>8, Labels: labels, Loops: loops}
}

// NewJump is the input of the consistent_hash first-pick program: a
// client's netns cookie, a service's frontend and n candidates.
func NewJump(client uint64, fe bpf.Frontend, n uint32) Jump {
	return Jump{Client: client, Fe: addrOf(fe), N: n}
}

// NewBenchArgs is the input of the benchmark programs: a service's
// frontend, the number of label vectors in the sources map and the
// lookups one run does.
func NewBenchArgs(fe bpf.Frontend, sources, loops uint32) BenchArgs {
	return BenchArgs{Fe: addrOf(fe), Sources: sources, Loops: loops}
}

func addrOf(fe bpf.Frontend) lookuptestLtAddr {
	return lookuptestLtAddr{Addr: fe.Addr, Port: fe.Port, Family: fe.Family}
}
