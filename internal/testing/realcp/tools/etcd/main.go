// Command etcd is etcd's server, built from go.etcd.io/etcd/server/v3 at the
// version this module pins, for the tests' real control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
