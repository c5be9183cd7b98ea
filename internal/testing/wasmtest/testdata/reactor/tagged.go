//go:build wasmtest_tagged

package main

//go:wasmexport wasmtest_tagged_export
func tagged() int32 { return 7 }
