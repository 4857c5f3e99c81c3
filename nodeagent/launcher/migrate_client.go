package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// migrationTargetPath prepares a migration target; it takes as long as a sync.
const migrationTargetPath = "/v1/migration/target"

// decodeBody decodes r's JSON body, at most limit bytes, into v.
func decodeBody(r *http.Request, limit int64, v any) error {
	return json.NewDecoder(io.LimitReader(r.Body, limit)).Decode(v)
}

// PrepareMigrationTarget makes the launcher the target of vmi's migration
// (see Launcher.PrepareMigrationTarget) and returns where its libvirt and
// directories are.
func (c *Client) PrepareMigrationTarget(ctx context.Context, vmi *v1.VirtualMachineInstance) (MigrationTargetInfo, error) {
	var info MigrationTargetInfo
	err := c.doInto(ctx, http.MethodPut, migrationTargetPath, vmi, &info)
	return info, err
}

// MigrationInfo returns the launcher's directories and libvirt socket.
func (c *Client) MigrationInfo(ctx context.Context) (MigrationTargetInfo, error) {
	var info MigrationTargetInfo
	err := c.doInto(ctx, http.MethodGet, "/v1/migration/info", nil, &info)
	return info, err
}

// Migrate starts the migration of the launcher's domain (see
// Launcher.Migrate); Status().Migration follows it.
func (c *Client) Migrate(ctx context.Context, req MigrateRequest) (Status, error) {
	return c.do(ctx, http.MethodPut, "/v1/migrate", req)
}

// AbortMigration aborts the migration under way; the guest stays.
func (c *Client) AbortMigration(ctx context.Context) (Status, error) {
	return c.do(ctx, http.MethodPut, "/v1/migration/abort", nil)
}

// doInto is do for routes that answer with something else than a Status.
func (c *Client) doInto(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout(path))
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://launcher"+path, rd)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s on %s: %w", method, path, c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errorAnswer(resp)
	}
	if err := decodeAnswer(resp.Body, MaxAnswerBytes, out); err != nil {
		return fmt.Errorf("%s %s on %s: %w", method, path, c.socket, err)
	}
	return nil
}
