//go:build !race

package fiberlimit

const raceEnabled = false
