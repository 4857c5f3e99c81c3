package vmctl

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/vmkit/vmkit/version"
)

// ClientVersion is the version of vmctl in this binary (version.Get).
func ClientVersion() VersionInfo { return version.Get() }

func (c *cli) versionCommand() *cobra.Command {
	var clientOnly bool
	var output string
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print the client and server version information.",
		Example: c.example("  # Print the client and server versions for the current context:\n  %[1]s version\n\n  # Only the client's, as JSON:\n  %[1]s version --client -o json"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" && output != "yaml" {
				return fmt.Errorf("unsupported output format %q: use json or yaml", output)
			}
			client := ClientVersion()
			if c.opts.ClientVersion != nil {
				client = *c.opts.ClientVersion
			}
			var server *VersionInfo
			var serverErr error
			if !clientOnly {
				s, _, err := c.subresources()
				if err == nil {
					server, err = s.Version(contextOf(cmd))
				}
				if err != nil {
					serverErr = fmt.Errorf("failed to get server version: %w", err)
				}
			}
			out := cmd.OutOrStdout()
			switch output {
			case "":
				fmt.Fprintf(out, "Client Version: %#v\n", client)
				if server != nil {
					fmt.Fprintf(out, "Server Version: %#v\n", *server)
				}
			default:
				doc := struct {
					ClientVersion VersionInfo  `json:"clientVersion"`
					ServerVersion *VersionInfo `json:"serverVersion,omitempty"`
				}{client, server}
				var data []byte
				var err error
				if output == "json" {
					data, err = json.MarshalIndent(doc, "", "  ")
					data = append(data, '\n')
				} else {
					data, err = yaml.Marshal(doc)
				}
				if err != nil {
					return err
				}
				if _, err := out.Write(data); err != nil {
					return err
				}
			}
			return serverErr
		},
	}
	cmd.Flags().BoolVarP(&clientOnly, "client", "c", false, "Client version only (no server required).")
	cmd.Flags().StringVarP(&output, "output", "o", "", "One of '', 'json' or 'yaml'.")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}
