package cli

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version: module version and VCS revision of the build",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			info, ok := debug.ReadBuildInfo()
			if !ok {
				fmt.Fprintln(a.stdout, "batchagent (no build information)")
				return nil
			}
			writeVersion(a.stdout, info)
			return nil
		},
	}
}

// writeVersion prints the main module's version, the VCS revision, time
// and modified flag the go command stamped, and the Go version.
func writeVersion(w io.Writer, info *debug.BuildInfo) {
	version := info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	fmt.Fprintf(w, "batchagent %s\n", version)
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(w, "  revision %s", rev)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(w, " (%s)", t)
		}
		if settings["vcs.modified"] == "true" {
			fmt.Fprint(w, ", modified")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  %s\n", info.GoVersion)
}
