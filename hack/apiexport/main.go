// Command apiexport keeps the Go SDK's packages of an apidiff module export.
//
// `apidiff -m -w FILE MODULE` writes the export data of every package of the
// module, main packages, test-only ones and internal ones included, as a zip
// archive: an entry "module" holding the module path and an entry
// "<import path>.x" for each package. apiexport copies that archive, keeping
// the entry "module" and the entries of the packages listed in KEEP (one
// import path a line) in their order, byte for byte, so that a baseline under
// hack/api holds only what other modules can import and the same tree always
// gives the same file. hack/apidiff.sh says which packages those are.
//
// usage: go run ./hack/apiexport -keep KEEP IN OUT
package main

import (
	"archive/zip"
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	keepFile := flag.String("keep", "", "file listing the import paths to keep, one a line")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: apiexport -keep KEEP IN OUT")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *keepFile == "" || flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	keep, err := readList(*keepFile)
	if err == nil {
		err = filter(flag.Arg(0), flag.Arg(1), keep)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "apiexport:", err)
		os.Exit(1)
	}
}

// readList reads the non-empty lines of a file.
func readList(name string) ([]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var list []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); line != "" {
			list = append(list, line)
		}
	}
	return list, s.Err()
}

// filter copies the export archive in to out with the entry "module" and the
// entries of the packages in keep. Every package in keep must have an entry:
// one missing means apidiff loaded another set of packages than the caller
// listed, and its API would silently go unchecked.
func filter(in, out string, keep []string) (err error) {
	r, err := zip.OpenReader(in)
	if err != nil {
		return err
	}
	defer r.Close()

	wanted := make(map[string]bool, len(keep))
	for _, p := range keep {
		wanted[p+".x"] = true
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	w := zip.NewWriter(f)
	haveModule := false
	for _, e := range r.File {
		switch {
		case e.Name == "module":
			haveModule = true
		case wanted[e.Name]:
			delete(wanted, e.Name)
		default:
			continue
		}
		if err := w.Copy(e); err != nil {
			return fmt.Errorf("%s: copying %s: %w", in, e.Name, err)
		}
	}
	if !haveModule {
		return fmt.Errorf("%s: no entry \"module\": not an apidiff module export (apidiff -m -w)", in)
	}
	if len(wanted) > 0 {
		var missing []string
		for _, p := range keep {
			if wanted[p+".x"] {
				missing = append(missing, p)
			}
		}
		return fmt.Errorf("%s has no export data for %s", in, strings.Join(missing, ", "))
	}
	return w.Close()
}
