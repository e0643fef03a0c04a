package serve

// Unexported names the external tests (package serve_test) read.
const MaxIdentityLen = maxIdentityLen

var (
	RoutePath = routePath
	APIKeyOf  = apiKeyOf
)
