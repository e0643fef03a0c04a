//go:build !race

package limitmw

const raceEnabled = false
