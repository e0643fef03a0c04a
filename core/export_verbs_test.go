package core

import (
	"context"
	"time"
)

// SetSleep replaces the sleep of Limiter.WaitN until the returned func is
// called.
func SetSleep(f func(context.Context, time.Duration) error) (restore func()) {
	old := sleep
	sleep = f
	return func() { sleep = old }
}
