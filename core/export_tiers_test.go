package core

// MaxOverrides is the unexported bound on a Tiers' overrides, for the
// boundary tests of the external test package.
const MaxOverrides = maxOverrides
