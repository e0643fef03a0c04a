//go:build !race

package respond

const raceEnabled = false
