//go:build race

package respond

const raceEnabled = true
