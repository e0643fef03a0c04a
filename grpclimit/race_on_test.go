//go:build race

package grpclimit_test

const raceEnabled = true
