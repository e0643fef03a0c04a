package core

// MaxOverrides is the unexported bound on a Tiers' overrides, for the
// boundary tests of the external test package.
const MaxOverrides = maxOverrides

// The unexported bounds the external test package's boundary tests use.
const (
	MaxTiers          = maxTiers
	MaxSync           = maxSync
	MaxFleetSize      = maxFleetSize
	MaxLease          = maxLease
	MaxCeilingPercent = maxCeilingPercent
)
