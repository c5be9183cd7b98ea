package shared

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/loctree/loctree/shared/wire"
)

// Format constants (docs/FORMAT.md). The record-level layout, sizes and
// field offsets, is package wire's (shared/wire).
const (
	FormatVersion = 8
	// MaxLevels is the largest number of routing scopes of a service.
	MaxLevels = 8
)

// Limits of one tree. Build rejects larger topologies with ErrTooLarge and
// Decode rejects larger blobs with ErrCorrupt.
const (
	MaxServices  = 1 << 16
	MaxEndpoints = 1 << 24
	MaxNodes     = 1 << 25
	MaxHosts     = 255
	MaxString    = 1<<16 - 1
	MaxBlobSize  = 1 << 31
	// MaxOverprovisioningFactor is the largest overprovisioning factor
	// (percent) the policy record holds.
	MaxOverprovisioningFactor = 1<<16 - 1
)

// magic opens every encoded tree (docs/FORMAT.md, "Header").
const magic = "LTRE"

// MagicSize is the length of the magic that opens every encoded tree.
const MagicSize = len(magic)

// IsEncoded reports whether head, the first bytes of a file, opens an
// encoded tree (as opposed to a topology file).
func IsEncoded(head []byte) bool { return len(head) >= MagicSize && string(head[:MagicSize]) == magic }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(blob []byte) uint32 { return crc32.Checksum(blob[wire.HFlags:], castagnoli) }

var le = binary.LittleEndian
