package launcher

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf16"
)

// isoFile is one file in the root directory of an ISO image.
type isoFile struct {
	Name string
	Data []byte
}

const isoSector = 2048

// writeISO writes an ISO 9660 image holding files in its root directory,
// with a Joliet tree so that names keep their case and dashes (cloud-init
// looks for "user-data", "meta-data" and "network-config"). label is the
// volume identifier (cloud-init's NoCloud needs "cidata"). Only a flat root
// directory is supported; it must fit in one sector (about 40 files).
//
// Layout: system area (16 sectors), primary and Joliet volume descriptors,
// terminator, four path tables, the two root directories, then the files.
func writeISO(w io.Writer, label string, mtime time.Time, files []isoFile) error {
	if len(label) > 32 {
		return fmt.Errorf("ISO volume label %q: longer than 32 characters", label)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if f.Name == "" || len(f.Name) > 64 || strings.ContainsAny(f.Name, "/;\x00") {
			return fmt.Errorf("ISO file name %q: must be 1-64 characters without '/' or ';'", f.Name)
		}
		if seen[strings.ToUpper(f.Name)] {
			return fmt.Errorf("ISO file name %q: duplicate", f.Name)
		}
		seen[strings.ToUpper(f.Name)] = true
	}
	const (
		pvdLBA, svdLBA, termLBA         = 16, 17, 18
		lPath, mPath, jlPath, jmPath    = 19, 20, 21, 22
		rootLBA, jolietRootLBA, dataLBA = 23, 24, 25
	)
	// File extents, in the order given.
	extents := make([]uint32, len(files))
	next := uint32(dataLBA)
	for i, f := range files {
		extents[i] = next
		next += uint32((len(f.Data) + isoSector - 1) / isoSector)
	}
	total := next

	primaryName := func(n string) []byte { return []byte(strings.ToUpper(n) + ";1") }
	jolietName := func(n string) []byte { return ucs2(n + ";1") }
	rootDir, err := isoDirectory(rootLBA, files, extents, primaryName, mtime)
	if err != nil {
		return err
	}
	jolietDir, err := isoDirectory(jolietRootLBA, files, extents, jolietName, mtime)
	if err != nil {
		return err
	}

	img := make([]byte, dataLBA*isoSector)
	sector := func(lba int) []byte { return img[lba*isoSector : (lba+1)*isoSector] }
	writeVolumeDescriptor(sector(pvdLBA), 1, []byte(label), total, lPath, mPath, rootLBA, mtime, false)
	writeVolumeDescriptor(sector(svdLBA), 2, ucs2(label), total, jlPath, jmPath, jolietRootLBA, mtime, true)
	term := sector(termLBA)
	term[0] = 255
	copy(term[1:6], "CD001")
	term[6] = 1
	writePathTable(sector(lPath), rootLBA, binary.LittleEndian)
	writePathTable(sector(mPath), rootLBA, binary.BigEndian)
	writePathTable(sector(jlPath), jolietRootLBA, binary.LittleEndian)
	writePathTable(sector(jmPath), jolietRootLBA, binary.BigEndian)
	copy(sector(rootLBA), rootDir)
	copy(sector(jolietRootLBA), jolietDir)
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

// isoDirectory returns the root directory's records ("." and ".." first,
// then the files sorted by identifier), at most one sector.
func isoDirectory(self uint32, files []isoFile, extents []uint32, name func(string) []byte, mtime time.Time) ([]byte, error) {
	order := make([]int, len(files))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		return string(name(files[order[a]].Name)) < string(name(files[order[b]].Name))
	})
	var dir []byte
	dir = append(dir, dirRecord(self, isoSector, true, []byte{0}, mtime)...)
	dir = append(dir, dirRecord(self, isoSector, true, []byte{1}, mtime)...)
	for _, i := range order {
		dir = append(dir, dirRecord(extents[i], uint32(len(files[i].Data)), false, name(files[i].Name), mtime)...)
	}
	if len(dir) > isoSector {
		return nil, fmt.Errorf("ISO root directory: %d files do not fit in one sector", len(files))
	}
	return dir, nil
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
func writeVolumeDescriptor(s []byte, typ byte, label []byte, total uint32, lPath, mPath, root uint32, mtime time.Time, joliet bool) {
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
	bothEndian32(s[132:140], 10)
	binary.LittleEndian.PutUint32(s[140:144], lPath)
	binary.BigEndian.PutUint32(s[148:152], mPath)
	copy(s[156:190], dirRecord(root, isoSector, true, []byte{0}, mtime))
	space(s[190:813])
	date := []byte(mtime.UTC().Format("20060102150405") + "00\x00")
	copy(s[813:830], date)
	copy(s[830:847], date)
	copy(s[847:864], "0000000000000000\x00")
	copy(s[864:881], "0000000000000000\x00")
	s[881] = 1
}

// writePathTable writes a path table holding only the root directory.
func writePathTable(s []byte, root uint32, order binary.ByteOrder) {
	s[0] = 1
	order.PutUint32(s[2:6], root)
	order.PutUint16(s[6:8], 1)
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
