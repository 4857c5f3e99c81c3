package launcher

import (
	"encoding/binary"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"
	"unicode/utf16"
)

// isoFile is one file of an ISO image. Name is its path from the root
// directory, with '/' between directories ("openstack/latest/user_data").
type isoFile struct {
	Name string
	Data []byte
}

const (
	isoSector = 2048
	// isoMaxDepth is ISO 9660's limit on directory levels, the root included.
	isoMaxDepth = 8
)

// writeISO writes an ISO 9660 image holding files, with a Joliet tree so
// that names keep their case and dashes (cloud-init looks for "user-data",
// "meta-data" and "network-config"; the config drive for
// "openstack/latest/meta_data.json"). label is the volume identifier
// (cloud-init's NoCloud needs "cidata", its ConfigDrive "config-2").
// Directories are created for the paths of the files; each path component
// must be 1-64 characters without ';', at most 8 directory levels deep.
//
// Layout: system area (16 sectors), primary and Joliet volume descriptors,
// terminator, four path tables (primary L and M, Joliet L and M), the
// primary directories and the Joliet directories in path table order, then
// the files in the order given.
func writeISO(w io.Writer, label string, mtime time.Time, files []isoFile) error {
	if len(label) > 32 {
		return fmt.Errorf("ISO volume label %q: longer than 32 characters", label)
	}
	root, err := isoHierarchy(files)
	if err != nil {
		return err
	}
	primary := newISOTree(root, files, mtime, func(n string, dir bool) []byte {
		if dir {
			return []byte(strings.ToUpper(n))
		}
		return []byte(strings.ToUpper(n) + ";1")
	})
	// Joliet names carry no ";1" version, as genisoimage and xorriso write
	// them: Linux strips it, but other readers (isoinfo) would not.
	joliet := newISOTree(root, files, mtime, func(n string, _ bool) []byte { return ucs2(n) })
	trees := []*isoTree{primary, joliet}

	const pvdLBA, svdLBA, termLBA, pathTableLBA = 16, 17, 18, 19
	next := uint32(pathTableLBA)
	for _, t := range trees {
		n := isoSectors(len(t.pathTable(binary.LittleEndian)))
		t.lPath, t.mPath = next, next+n
		next += 2 * n
	}
	// Directory lengths do not depend on extents: a first pass with zero
	// extents sizes them.
	extents := make([]uint32, len(files))
	for _, t := range trees {
		for i := range t.dirs {
			t.size[i] = uint32(len(t.directory(i, extents)))
		}
	}
	for _, t := range trees {
		for i := range t.dirs {
			t.lba[i] = next
			next += t.size[i] / isoSector
		}
	}
	dataLBA := next
	for i, f := range files {
		extents[i] = next
		next += isoSectors(len(f.Data))
	}
	total := next

	img := make([]byte, dataLBA*isoSector)
	at := func(lba uint32) []byte { return img[lba*isoSector:] }
	writeVolumeDescriptor(at(pvdLBA), 1, []byte(label), total, primary, mtime, false)
	writeVolumeDescriptor(at(svdLBA), 2, ucs2(label), total, joliet, mtime, true)
	term := at(termLBA)
	term[0] = 255
	copy(term[1:6], "CD001")
	term[6] = 1
	for _, t := range trees {
		copy(at(t.lPath), t.pathTable(binary.LittleEndian))
		copy(at(t.mPath), t.pathTable(binary.BigEndian))
		for i := range t.dirs {
			copy(at(t.lba[i]), t.directory(i, extents))
		}
	}
	if _, err := w.Write(img); err != nil {
		return err
	}
	for _, f := range files {
		if _, err := w.Write(f.Data); err != nil {
			return err
		}
		if pad := (isoSector - len(f.Data)%isoSector) % isoSector; pad > 0 {
			if _, err := w.Write(make([]byte, pad)); err != nil {
				return err
			}
		}
	}
	return nil
}

func isoSectors(n int) uint32 { return uint32((n + isoSector - 1) / isoSector) }

// isoDir is one directory of an image being laid out.
type isoDir struct {
	name   string // last path component; "" for the root
	parent *isoDir
	dirs   []*isoDir
	files  []int // indexes into the files given to writeISO
}

// isoHierarchy checks the file names and builds the directory tree.
// Names are compared without case, as the primary tree holds them upper-case.
func isoHierarchy(files []isoFile) (*isoDir, error) {
	root := &isoDir{}
	dirs := map[string]*isoDir{"": root} // by upper-case path
	isFile := map[string]bool{}
	for i, f := range files {
		parts := strings.Split(f.Name, "/")
		if len(parts) > isoMaxDepth {
			return nil, fmt.Errorf("ISO file name %q: deeper than %d directory levels", f.Name, isoMaxDepth)
		}
		for _, p := range parts {
			if p == "" || len(p) > 64 || p == "." || p == ".." || strings.ContainsAny(p, ";\x00") {
				return nil, fmt.Errorf("ISO file name %q: each '/'-separated part must be 1-64 characters without ';'", f.Name)
			}
		}
		d := root
		for j := range parts[:len(parts)-1] {
			key := strings.ToUpper(strings.Join(parts[:j+1], "/"))
			if isFile[key] {
				return nil, fmt.Errorf("ISO file name %q: %s is a file", f.Name, strings.Join(parts[:j+1], "/"))
			}
			child := dirs[key]
			if child == nil {
				child = &isoDir{name: parts[j], parent: d}
				dirs[key] = child
				d.dirs = append(d.dirs, child)
			}
			d = child
		}
		key := strings.ToUpper(f.Name)
		if isFile[key] || dirs[key] != nil {
			return nil, fmt.Errorf("ISO file name %q: duplicate", f.Name)
		}
		isFile[key] = true
		d.files = append(d.files, i)
	}
	return root, nil
}

// isoTree is the primary or the Joliet view of the directory tree.
type isoTree struct {
	files []isoFile
	mtime time.Time
	id    func(name string, dir bool) []byte // the identifier of a record
	dirs  []*isoDir                          // in path table order
	num   map[*isoDir]int                    // index in dirs
	lba   []uint32                           // extent of each directory
	size  []uint32                           // bytes, whole sectors
	// lPath and mPath are the extents of the little- and big-endian path tables.
	lPath, mPath uint32
}

// newISOTree orders the directories as path tables require: by level,
// then by parent number, then by identifier; a breadth-first walk that
// visits children sorted by identifier gives that order.
func newISOTree(root *isoDir, files []isoFile, mtime time.Time, id func(string, bool) []byte) *isoTree {
	t := &isoTree{files: files, mtime: mtime, id: id, dirs: []*isoDir{root}, num: map[*isoDir]int{}}
	for i := 0; i < len(t.dirs); i++ {
		d := t.dirs[i]
		t.num[d] = i
		kids := append([]*isoDir(nil), d.dirs...)
		sort.Slice(kids, func(a, b int) bool { return string(id(kids[a].name, true)) < string(id(kids[b].name, true)) })
		t.dirs = append(t.dirs, kids...)
	}
	t.lba = make([]uint32, len(t.dirs))
	t.size = make([]uint32, len(t.dirs))
	return t
}

// parent is the index of directory i's parent; the root is its own parent.
func (t *isoTree) parent(i int) int {
	if p := t.dirs[i].parent; p != nil {
		return t.num[p]
	}
	return i
}

// pathTable returns the path table in the given byte order, unpadded.
func (t *isoTree) pathTable(order binary.ByteOrder) []byte {
	var pt []byte
	for i, d := range t.dirs {
		id := []byte{0}
		if d.parent != nil {
			id = t.id(d.name, true)
		}
		r := make([]byte, 8+len(id)+len(id)%2)
		r[0] = byte(len(id))
		order.PutUint32(r[2:6], t.lba[i])
		order.PutUint16(r[6:8], uint16(t.parent(i)+1))
		copy(r[8:], id)
		pt = append(pt, r...)
	}
	return pt
}

// directory returns the records of directory i ("." and ".." first, then
// its directories and files sorted by identifier), padded to whole sectors;
// a record never crosses a sector boundary.
func (t *isoTree) directory(i int, extents []uint32) []byte {
	d, p := t.dirs[i], t.parent(i)
	type entry struct{ id, rec []byte }
	var entries []entry
	for _, c := range d.dirs {
		n, id := t.num[c], t.id(c.name, true)
		entries = append(entries, entry{id, dirRecord(t.lba[n], t.size[n], true, id, t.mtime)})
	}
	for _, f := range d.files {
		id := t.id(path.Base(t.files[f].Name), false)
		entries = append(entries, entry{id, dirRecord(extents[f], uint32(len(t.files[f].Data)), false, id, t.mtime)})
	}
	sort.Slice(entries, func(a, b int) bool { return string(entries[a].id) < string(entries[b].id) })
	recs := [][]byte{
		dirRecord(t.lba[i], t.size[i], true, []byte{0}, t.mtime),
		dirRecord(t.lba[p], t.size[p], true, []byte{1}, t.mtime),
	}
	for _, e := range entries {
		recs = append(recs, e.rec)
	}
	var dir []byte
	for _, r := range recs {
		if used := len(dir) % isoSector; used+len(r) > isoSector {
			dir = append(dir, make([]byte, isoSector-used)...)
		}
		dir = append(dir, r...)
	}
	return append(dir, make([]byte, int(isoSectors(len(dir)))*isoSector-len(dir))...)
}

// dirRecord is one ISO 9660 directory record.
func dirRecord(extent, size uint32, isDir bool, id []byte, mtime time.Time) []byte {
	n := 33 + len(id)
	if n%2 == 1 {
		n++
	}
	r := make([]byte, n)
	r[0] = byte(n)
	bothEndian32(r[2:10], extent)
	bothEndian32(r[10:18], size)
	t := mtime.UTC()
	r[18], r[19], r[20] = byte(t.Year()-1900), byte(t.Month()), byte(t.Day())
	r[21], r[22], r[23] = byte(t.Hour()), byte(t.Minute()), byte(t.Second())
	if isDir {
		r[25] = 2
	}
	bothEndian16(r[28:32], 1)
	r[32] = byte(len(id))
	copy(r[33:], id)
	return r
}

// writeVolumeDescriptor fills a primary (type 1) or Joliet supplementary
// (type 2) volume descriptor.
func writeVolumeDescriptor(s []byte, typ byte, label []byte, total uint32, t *isoTree, mtime time.Time, joliet bool) {
	s[0] = typ
	copy(s[1:6], "CD001")
	s[6] = 1
	space := func(b []byte) {
		for i := range b {
			if joliet && i%2 == 0 {
				b[i] = 0
			} else {
				b[i] = ' '
			}
		}
	}
	space(s[8:40])
	space(s[40:72])
	copy(s[40:72], label)
	bothEndian32(s[80:88], total)
	if joliet {
		copy(s[88:91], "%/E") // UCS-2 level 3
	}
	bothEndian16(s[120:124], 1)
	bothEndian16(s[124:128], 1)
	bothEndian16(s[128:132], isoSector)
	bothEndian32(s[132:140], uint32(len(t.pathTable(binary.LittleEndian))))
	binary.LittleEndian.PutUint32(s[140:144], t.lPath)
	binary.BigEndian.PutUint32(s[148:152], t.mPath)
	copy(s[156:190], dirRecord(t.lba[0], t.size[0], true, []byte{0}, mtime))
	space(s[190:813])
	date := []byte(mtime.UTC().Format("20060102150405") + "00\x00")
	copy(s[813:830], date)
	copy(s[830:847], date)
	copy(s[847:864], "0000000000000000\x00")
	copy(s[864:881], "0000000000000000\x00")
	s[881] = 1
}

func bothEndian32(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b[0:4], v)
	binary.BigEndian.PutUint32(b[4:8], v)
}

func bothEndian16(b []byte, v uint16) {
	binary.LittleEndian.PutUint16(b[0:2], v)
	binary.BigEndian.PutUint16(b[2:4], v)
}

// ucs2 encodes s as big-endian UTF-16, as Joliet names are.
func ucs2(s string) []byte {
	u := utf16.Encode([]rune(s))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.BigEndian.PutUint16(b[2*i:], c)
	}
	return b
}
