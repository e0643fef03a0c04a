//go:build !race

package keyfuncs

const raceEnabled = false
