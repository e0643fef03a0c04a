package fiberlimit

import (
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"
)

// verifiedFiber is the fiber version whose router routes.go was checked
// against. A different version fails TestFiberVersionVerified until
// someone has run the differential tests on it and updated the constant.
const verifiedFiber = "2.52.15"

// TestFiberVersionVerified fails on the first build with another fiber:
// routes.go re-states fiber's route order and buckets, and fastroutes.go
// its matching of the common patterns (fiber has no public way for a Use
// handler to learn the route that will serve the request), so a fiber
// upgrade must be checked, not assumed.
func TestFiberVersionVerified(t *testing.T) {
	require.Equal(t, verifiedFiber, fiber.Version, "fiber was upgraded: fiberlimit's routes.go and fastroutes.go "+
		"re-state fiber's router. Run TestRouteTableMatchesFibersRouter, TestRouteTableGroupsMountsAndUse, "+
		"TestUseRoutesMatchesFibersFlag and the conformance suite on the new fiber, fix routes.go or "+
		"fastroutes.go if they fail (read fiber's router.go and path.go changes), then set verifiedFiber to %s", fiber.Version)
}
