package main

import (
	"bufio"
	"fmt"
	"slices"
	"strings"
)

// depGraph is what `apt-cache depends --recurse` reports: the Depends and
// PreDepends of every package it reached, and who provides what.
type depGraph struct {
	// deps holds each package's dependency groups; a group lists
	// alternatives in apt's order, virtual names in angle brackets.
	deps map[string][][]string
	// providers lists, for a dependency name, the packages apt printed
	// below it as providing it.
	providers map[string][]string
}

// parseDepends reads the output of
//
//	apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
//	  --no-breaks --no-replaces --no-enhances PACKAGE...
//
// which lists each package at column 0, then its dependencies one per line
// ("  Depends: libc6", " |Depends: debconf" when the next line is an
// alternative of this one, "  PreDepends: <debconf-2.0>" for a virtual
// package), each followed by the packages providing it indented by four
// spaces. Relations other than Depends and PreDepends are ignored.
func parseDepends(out string) (depGraph, error) {
	g := depGraph{deps: make(map[string][][]string), providers: make(map[string][]string)}
	var (
		pkg       string   // the package being read
		target    string   // the dependency the provider lines belong to ("" when ignored)
		group     []string // alternatives read so far
		continued bool     // the last dependency line ended its group with "|"
	)
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), " \t\r")
		switch {
		case line == "":
			continue
		case !strings.HasPrefix(line, " "):
			if continued {
				return g, fmt.Errorf("line %d: %s starts before the alternatives of %s ended", n, line, pkg)
			}
			pkg, target, group = line, "", nil
			if !isVirtual(pkg) {
				// apt lists a package twice when it is both named and
				// reached; both lists are the same, keep one.
				g.deps[pkg] = nil
			}
		case strings.HasPrefix(line, "    "):
			if target != "" {
				p := strings.TrimSpace(line)
				if !slices.Contains(g.providers[target], p) {
					g.providers[target] = append(g.providers[target], p)
				}
			}
		default:
			if pkg == "" {
				return g, fmt.Errorf("line %d: %q comes before any package", n, line)
			}
			alt := strings.HasPrefix(line, " |")
			kind, dep, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, " |")), ": ")
			if !ok || dep == "" {
				return g, fmt.Errorf("line %d: cannot parse %q", n, line)
			}
			if kind != "Depends" && kind != "PreDepends" {
				if continued {
					return g, fmt.Errorf("line %d: %s among the alternatives of a dependency", n, kind)
				}
				target = ""
				continue
			}
			target = dep
			group = append(group, dep)
			continued = alt
			if !alt {
				if !isVirtual(pkg) {
					g.deps[pkg] = append(g.deps[pkg], group)
				}
				group = nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return g, err
	}
	if continued {
		return g, fmt.Errorf("the output ends among the alternatives of a dependency of %s", pkg)
	}
	return g, nil
}

func isVirtual(name string) bool {
	return strings.HasPrefix(name, "<") && strings.HasSuffix(name, ">")
}

// closure returns the packages roots need, sorted: the roots, and for each
// package taken, one package of each of its dependency groups (see choose).
// Packages in exclude are neither taken nor followed. arch is the native
// architecture ("amd64"); names qualified with another one are not
// eligible.
func (g depGraph) closure(roots []string, exclude []string, arch string) ([]string, error) {
	taken := make(map[string]bool)
	queue := slices.Clone(roots)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if taken[p] || slices.Contains(exclude, p) {
			continue
		}
		groups, ok := g.deps[p]
		if !ok {
			return nil, fmt.Errorf("apt-cache depends does not list package %s", p)
		}
		taken[p] = true
		for _, alts := range groups {
			c, err := g.choose(alts, arch, taken)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			if !slices.Contains(exclude, c) {
				queue = append(queue, c)
			}
		}
	}
	out := make([]string, 0, len(taken))
	for p := range taken {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

// choose picks the package that satisfies a group of alternatives, the way
// apt would for a minimal installation: the first alternative that is a
// real package; failing that, a provider of a virtual alternative, one
// already taken if there is one, else the first listed.
func (g depGraph) choose(alts []string, arch string, taken map[string]bool) (string, error) {
	for _, a := range alts {
		if isVirtual(a) {
			continue
		}
		if p, ok := nativeName(a, arch); ok {
			if _, listed := g.deps[p]; listed {
				return p, nil
			}
		}
	}
	var first string
	for _, a := range alts {
		for _, prov := range g.providers[a] {
			p, ok := nativeName(prov, arch)
			if _, listed := g.deps[p]; !ok || !listed {
				continue
			}
			if taken[p] {
				return p, nil
			}
			if first == "" {
				first = p
			}
		}
	}
	if first == "" {
		return "", fmt.Errorf("nothing satisfies %s", strings.Join(alts, " | "))
	}
	return first, nil
}

// nativeName strips an architecture qualifier that names arch or "any"
// ("libc6:amd64" is libc6) and reports false for another architecture.
func nativeName(name, arch string) (string, bool) {
	base, qual, ok := strings.Cut(name, ":")
	if !ok {
		return name, true
	}
	return base, qual == arch || qual == "any" || qual == "all"
}
