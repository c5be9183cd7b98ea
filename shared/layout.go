package shared

import (
	"encoding/binary"
	"hash/crc32"
)

// Record sizes and format constants (docs/FORMAT.md).
const (
	FormatVersion      = 4
	HeaderSize         = 64
	ServiceRecordSize  = 64
	NodeRecordSize     = 24
	EndpointRecordSize = 32
	PolicyRecordSize   = 32
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

// Header field offsets.
const (
	hMagic        = 0
	hVersion      = 4
	hHeaderSize   = 6
	hChecksum     = 8
	hFlags        = 12
	hGeneration   = 16
	hTotalSize    = 24
	hServiceCount = 28
	hNodeCount    = 32
	hEndpointCnt  = 36
	hStringsSize  = 40
	hServicesOff  = 44
	hNodesOff     = 48
	hEndpointsOff = 52
	hStringsOff   = 56
	hAuxNodeCount = 60
)

// Policy record field offsets (format version 2; min_rank and distribute_count 3;
// network_rule and network_node_count 4).
const (
	pDegradedRoot    = 0
	pDegradedCount   = 4
	pUnhealthyRoot   = 8
	pUnhealthyCount  = 12
	pEpDegraded      = 16
	pOverprovision   = 20
	pPanic           = 22
	pFailoverCount   = 23
	pMinRank         = 24 // format version 3
	pDistributeCount = 25 // format version 3
	pNetworkRule     = 26 // format version 4
	pReserved        = 27 // byte 27
	pNetworkCount    = 28 // format version 4
)

// Service record field offsets.
const (
	sRoot       = 0
	sNodeCount  = 4
	sEpFirst    = 8
	sEpEligible = 12
	sEpTotal    = 16
	sLevels     = 20
	sMode       = 21
	sPolicy     = 22
	sHealth     = 23
	sMetaOff    = 24
	sMetaLen    = 28
	sVIPAddr    = 32
	sVIPPort    = 48
	sVIPFamily  = 50
	sPad        = 51
	sAffinity   = 52
	sReserved   = 56
)

// Node record field offsets.
const (
	nLabel      = 0
	nLo         = 8
	nHi         = 12
	nFirstChild = 16
	nChildCount = 20
)

// Endpoint record field offsets.
const (
	eAddr      = 0
	ePort      = 16
	eFamily    = 18
	eFlags     = 19
	eWeight    = 20
	eCumWeight = 24

	flagHealthy = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(blob []byte) uint32 { return crc32.Checksum(blob[hFlags:], castagnoli) }

var le = binary.LittleEndian
