//go:build !race

package echolimit

const raceEnabled = false
