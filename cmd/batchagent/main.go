// Command batchagent runs many LLM agents in parallel: input list in,
// structured result list out. Run `batchagent help` for the subcommands.
package main

import (
	"context"
	"os"

	"github.com/batchagent/batchagent/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
