package memstore

import (
	"slices"
)

// The memory accounting: what the Go allocator takes for the tables.

// sizeClasses are the Go allocator's size classes for small objects
// (internal/runtime/gc); TestAllocBytes checks them against the runtime.
var sizeClasses = [...]uint16{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048,
	2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880,
	12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

// allocBytes is what the Go allocator takes for an n-byte object without
// pointers: its size class up to 32 KiB, whole 8 KiB pages above.
func allocBytes(n int) int {
	if n <= 0 {
		return 0
	}
	if n > 32<<10 {
		return (n + 8<<10 - 1) &^ (8<<10 - 1)
	}
	i, _ := slices.BinarySearch(sizeClasses[:], uint16(n))
	return int(sizeClasses[i])
}

// indexBytes is what an index of n chunks takes (slice headers, with the
// allocator's 8-byte header for objects with pointers).
func indexBytes(n int) int { return allocBytes(24*n + 8) }
