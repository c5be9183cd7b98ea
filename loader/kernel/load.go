package kernel

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
)

// loadObjects creates (or re-adopts) the maps, then loads the programs side
// by side, one per CPU at most. The kernel verifies a program in the
// BPF_PROG_LOAD call of the thread that loads it (kernel/bpf/syscall.c
// bpf_prog_load → bpf_check), with no lock held across programs, so an
// agent start costs the slowest program's verification on a node with as
// many CPUs as programs, not their sum. On an error every object loaded so
// far is closed.
func loadObjects(spec *ebpf.CollectionSpec, objs *bpf.Objects, opts ebpf.CollectionOptions) error {
	if err := spec.LoadAndAssign(objs.MapSet(), &opts); err != nil {
		return err
	}
	maps := mapsByName(objs.MapSet())
	progs := reflect.ValueOf(objs.ProgramSet()).Elem()
	errs := make([]error, progs.NumField())
	sem := make(chan struct{}, runtime.NumCPU())
	var wg sync.WaitGroup
	for i := range progs.NumField() {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = loadProgram(spec, progs.Type().Field(i), progs.Field(i), maps, opts.Programs)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		objs.Close()
		return err
	}
	return nil
}

// loadProgram loads the one program of the struct field f into v, with the
// maps already loaded. A one-field struct with f's tag is what
// LoadAndAssign is given, so it loads that program and no map of its own.
func loadProgram(spec *ebpf.CollectionSpec, f reflect.StructField, v reflect.Value, maps map[string]*ebpf.Map, popts ebpf.ProgramOptions) error {
	one := reflect.New(reflect.StructOf([]reflect.StructField{{Name: "P", Type: f.Type, Tag: f.Tag}}))
	err := spec.Copy().LoadAndAssign(one.Interface(), &ebpf.CollectionOptions{Programs: popts, MapReplacements: maps})
	if err != nil {
		return fmt.Errorf("program %s: %w", f.Tag.Get("ebpf"), err)
	}
	v.Set(one.Elem().Field(0))
	return nil
}

// mapsByName are the loaded maps by their names in the object file.
func mapsByName(m *bpf.Maps) map[string]*ebpf.Map {
	out := map[string]*ebpf.Map{}
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		out[v.Type().Field(i).Tag.Get("ebpf")] = v.Field(i).Interface().(*ebpf.Map)
	}
	return out
}
