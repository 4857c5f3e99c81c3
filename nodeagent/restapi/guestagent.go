package restapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"

	"github.com/vmkit/vmkit/nodeagent/internal/guestagent"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// errNoGuestAgent is the REST API's answer for a VMI without a connected
// guest agent.
const errNoGuestAgent = "VMI does not have a guest agent connected"

// serveGuestAgent answers a guest agent query: guestosinfo, userlist or
// filesystemlist.
func (s *server) serveGuestAgent(query string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		vmi, c, ok := s.vmiOf(w, r, agentConnected)
		if !ok {
			return
		}
		if !agentConnected(vmi) {
			writeError(w, http.StatusConflict, errNoGuestAgent)
			return
		}
		var (
			out any
			err error
		)
		switch query {
		case "guestosinfo":
			out, err = guestAgentQuery(r.Context(), c)
		case "userlist":
			var raw []byte
			if raw, err = c.GuestAgentCommand(r.Context(), "guest-get-users"); err == nil {
				var l v1.VirtualMachineInstanceGuestOSUserList
				l.Items, err = guestagent.Users(raw)
				out = l
			}
		case "filesystemlist":
			var raw []byte
			if raw, err = c.GuestAgentCommand(r.Context(), "guest-get-fsinfo"); err == nil {
				var l v1.VirtualMachineInstanceFileSystemList
				l.Items, err = guestagent.FileSystems(raw)
				out = l
			}
		}
		switch {
		case err == nil:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(out)
		case guestagent.Unavailable(err):
			writeError(w, http.StatusConflict, errNoGuestAgent)
		default:
			s.b.CountLauncherError("guestagent")
			writeLauncherError(w, err)
		}
	}
}

// agentConnected reports whether the VMI's AgentConnected condition is True.
func agentConnected(vmi *v1.VirtualMachineInstance) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == v1.VirtualMachineInstanceAgentConnected {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// guestAgentQuery runs the guest agent commands behind guestosinfo. A
// command the guest agent does not know leaves its part empty; a guest
// agent that stops answering fails the whole.
func guestAgentQuery(ctx context.Context, c *client.Client) (v1.VirtualMachineInstanceGuestAgentInfo, error) {
	var out v1.VirtualMachineInstanceGuestAgentInfo
	run := func(command string, parse func(json.RawMessage) error) error {
		raw, err := c.GuestAgentCommand(ctx, command)
		switch {
		case guestagent.Unavailable(err):
			return err
		case err != nil:
			return nil // the guest agent does not support it
		}
		if err := parse(raw); err != nil {
			return fmt.Errorf("%s: %w", command, err)
		}
		return nil
	}
	steps := []struct {
		command string
		parse   func(json.RawMessage) error
	}{
		{"guest-info", func(raw json.RawMessage) error {
			var r struct {
				Version  string `json:"version"`
				Commands []struct {
					Name    string `json:"name"`
					Enabled bool   `json:"enabled"`
				} `json:"supported_commands"`
			}
			if err := json.Unmarshal(raw, &r); err != nil {
				return err
			}
			out.GAVersion = r.Version
			for _, c := range r.Commands {
				out.SupportedCommands = append(out.SupportedCommands, v1.GuestAgentCommandInfo{Name: c.Name, Enabled: c.Enabled})
			}
			return nil
		}},
		{"guest-get-host-name", func(raw json.RawMessage) error {
			var r struct {
				HostName string `json:"host-name"`
			}
			err := json.Unmarshal(raw, &r)
			out.Hostname = r.HostName
			return err
		}},
		{"guest-get-osinfo", func(raw json.RawMessage) error {
			var err error
			out.OS, err = guestagent.OSInfo(raw)
			return err
		}},
		{"guest-get-timezone", func(raw json.RawMessage) error {
			var r struct {
				Zone   string `json:"zone"`
				Offset int    `json:"offset"`
			}
			if err := json.Unmarshal(raw, &r); err != nil {
				return err
			}
			out.Timezone = fmt.Sprintf("%s, %d", r.Zone, r.Offset)
			return nil
		}},
		{"guest-get-users", func(raw json.RawMessage) error {
			var err error
			out.UserList, err = guestagent.Users(raw)
			return err
		}},
		{"guest-get-fsinfo", func(raw json.RawMessage) error {
			var err error
			out.FSInfo.Filesystems, err = guestagent.FileSystems(raw)
			return err
		}},
		{"guest-fsfreeze-status", func(raw json.RawMessage) error {
			// "frozen" or "thawed"
			return json.Unmarshal(raw, &out.FSFreezeStatus)
		}},
	}
	for _, s := range steps {
		if err := run(s.command, s.parse); err != nil {
			return v1.VirtualMachineInstanceGuestAgentInfo{}, err
		}
	}
	return out, nil
}
