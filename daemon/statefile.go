package daemon

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// Why a state file is moved aside (the reason label of
// drainwatch_state_file_reset_total).
const (
	resetTruncated     = "truncated"
	resetCorrupt       = "corrupt"
	resetFutureVersion = "future_version"
)

// errFutureVersion is a store written by a newer drainwatch (a downgrade):
// its layout may mean something else to this version.
var errFutureVersion = errors.New("state store written by a newer drainwatch")

// bbolt's meta page, as go.etcd.io/bbolt lays it out (internal/common
// meta.go): a 16-byte page header, then magic, version, page size, flags,
// the root bucket (16 bytes), the freelist page, the high-water page id,
// the transaction id and an FNV-64a checksum of what precedes it.
const (
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	metaOffset      = 16
	metaPgidAt      = metaOffset + 40
	metaTxidAt      = metaOffset + 48
	metaChecksumAt  = metaOffset + 56
	defaultPageSize = 4096
)

// boltMeta is what the file check needs of a meta page.
type boltMeta struct {
	pageSize   uint32
	pgid, txid uint64
}

// checkStateFile says why the bbolt file at path cannot be opened safely
// ("" when it can, or does not exist). bbolt maps the file and would touch
// the pages past the end of a truncated one: SIGBUS, a crash recover()
// cannot catch, and a crash loop. The file must hold every page its newest
// valid meta page counts.
func checkStateFile(path string) (reason string, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("opening state file %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return "", err
	}
	m0, ok0 := readMeta(f, 0)
	size := int64(m0.pageSize)
	if !ok0 {
		size = defaultPageSize
	}
	m1, ok1 := readMeta(f, size)
	switch {
	case !ok0 && !ok1 && fi.Size() < 2*defaultPageSize:
		return resetTruncated, nil
	case !ok0 && !ok1:
		return resetCorrupt, nil
	}
	newest := m0
	if !ok0 || (ok1 && m1.txid > m0.txid) {
		newest = m1
	}
	if fi.Size() < int64(newest.pgid)*int64(newest.pageSize) {
		return resetTruncated, nil
	}
	return "", nil
}

// readMeta reads and validates the meta page at off.
func readMeta(r io.ReaderAt, off int64) (boltMeta, bool) {
	buf := make([]byte, metaChecksumAt+8)
	if _, err := r.ReadAt(buf, off); err != nil {
		return boltMeta{}, false
	}
	ne := binary.NativeEndian
	h := fnv.New64a()
	h.Write(buf[metaOffset:metaChecksumAt])
	if ne.Uint32(buf[metaOffset:]) != boltMagic || ne.Uint32(buf[metaOffset+4:]) != boltVersion ||
		h.Sum64() != ne.Uint64(buf[metaChecksumAt:]) {
		return boltMeta{}, false
	}
	m := boltMeta{pageSize: ne.Uint32(buf[metaOffset+8:]), pgid: ne.Uint64(buf[metaPgidAt:]), txid: ne.Uint64(buf[metaTxidAt:])}
	return m, m.pageSize >= 512 && m.pageSize&(m.pageSize-1) == 0
}
