package grpclimit

// WithSleep is withSleep, for the client tests of the external test
// package: they advance a manual clock instead of sleeping.
var WithSleep = withSleep

// Exempt, HTTPStatus and UnregisteredRoute are the unexported exempt,
// httpStatus and unregisteredRoute, for the external tests.
var (
	Exempt     = exempt
	HTTPStatus = httpStatus
)

const UnregisteredRoute = unregisteredRoute
