// Package tools pins the code generators and linters vmkit's Makefile runs.
// It is a separate module so that none of them enters the SDK's go.mod.
//
// golang.org/x/exp is required at the version of its cmd/apidiff that
// hack/apidiff.sh uses: module mode (-m) and module export files (-m -w).
// vmkit's go.mod has an older golang.org/x/exp, and hack/share-versions.sh
// lowers a module to vmkit's version when nothing here needs more: after it,
// check that golang.org/x/exp is still this one.
package tools
