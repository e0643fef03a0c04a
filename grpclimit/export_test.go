package grpclimit

import (
	"context"
	"time"
)

// WithSleep returns cfg with sleep in place of the wait between
// attempts, for the client tests of the external test package: they
// advance a manual clock instead of sleeping.
func WithSleep(cfg ClientConfig, sleep func(ctx context.Context, d time.Duration) error) ClientConfig {
	cfg.sleep = sleep
	return cfg
}

// Sleeps reports whether cfg has a sleep of its own (WithSleep).
func Sleeps(cfg ClientConfig) bool { return cfg.sleep != nil }

// Exempt, HTTPStatus and UnregisteredRoute are the unexported exempt,
// httpStatus and unregisteredRoute, for the external tests.
var (
	Exempt     = exempt
	HTTPStatus = httpStatus
)

const UnregisteredRoute = unregisteredRoute
