package shared

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/loctree/loctree/shared/wire"
)

// ReadBlob reads one encoded tree from r without trusting r's length: the
// 64-byte header is read and checked first (magic, version, header size,
// total_size within MaxBlobSize), then exactly total_size bytes. A wrong
// input (another file, /dev/zero, an endless stream) fails after 64 bytes,
// and memory grows only with the bytes actually read. Errors wrap
// ErrCorrupt. The blob still needs Decode.
func ReadBlob(r io.Reader) ([]byte, error) {
	hdr := make([]byte, wire.HeaderSize)
	if n, err := io.ReadFull(r, hdr); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, corrupt("%d bytes, shorter than the %d-byte header", n, wire.HeaderSize)
		}
		return nil, err
	}
	total, err := blobSize(hdr)
	if err != nil {
		return nil, err
	}
	buf := bytes.NewBuffer(hdr)
	buf.Grow(min(int(total), preallocMax) - wire.HeaderSize + 1)
	if _, err := buf.ReadFrom(io.LimitReader(r, int64(total)-wire.HeaderSize+1)); err != nil {
		return nil, err
	}
	switch got := buf.Len(); {
	case got < int(total):
		return nil, corrupt("header says %d bytes, input ends after %d", total, got)
	case got > int(total):
		return nil, corrupt("header says %d bytes, input has more; one tree per file", total)
	}
	return buf.Bytes(), nil
}

// preallocMax bounds what ReadBlob allocates on the header's word alone;
// beyond it the buffer grows with the bytes read.
const preallocMax = 64 << 20

// blobSize checks the fields of a header that say what the input is and
// how long, and returns total_size.
func blobSize(hdr []byte) (uint32, error) {
	if string(hdr[wire.HMagic:wire.HMagic+MagicSize]) != magic {
		return 0, corrupt("bad magic %q (want %q): not a loctree tree", hdr[:4], magic)
	}
	if v := le.Uint16(hdr[wire.HVersion:]); v != FormatVersion {
		return 0, corrupt("format version %d (this build reads %d)", v, FormatVersion)
	}
	if h := le.Uint16(hdr[wire.HHeaderSize:]); h != wire.HeaderSize {
		return 0, corrupt("header size %d (want %d)", h, wire.HeaderSize)
	}
	total := le.Uint32(hdr[wire.HTotalSize:])
	if total < wire.HeaderSize || uint64(total) > MaxBlobSize {
		return 0, fmt.Errorf("%w: header says %d bytes (want %d..%d)", ErrCorrupt, total, wire.HeaderSize, uint64(MaxBlobSize))
	}
	return total, nil
}
