// Command reactor is the smallest wasip1 reactor: wasmtest's own test builds it.
package main

func main() {}

//go:wasmexport answer
func answer() int32 { return 42 }
