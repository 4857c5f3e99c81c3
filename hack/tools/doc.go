// Package tools pins the code generators and linters vmkit's Makefile runs.
// It is a separate module so that none of them enters the SDK's go.mod.
package tools
