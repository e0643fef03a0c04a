package grpclimit

// WithSleep is withSleep, for the client tests of the external test
// package: they advance a manual clock instead of sleeping.
var WithSleep = withSleep
