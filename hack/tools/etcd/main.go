// Command etcd is etcd's own server entry point, built from the published
// go.etcd.io/etcd/server/v3 module for the member clusters of the end-to-end tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
