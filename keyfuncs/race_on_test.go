//go:build race

package keyfuncs

const raceEnabled = true
