// Command broken does not compile: wasmtest's own test checks that the
// compiler's message reaches the failure.
package main

func main() { undefinedOnPurpose() }
