// Command loctree builds, inspects and queries locality trees, and runs the
// agent and the proxy-wasm host.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
