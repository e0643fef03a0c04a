package core

// RenewNow renews c's held slots once (the renewal timer's work) and
// reports whether any is held.
func (c *Concurrency) RenewNow() bool { return c.renew() }

// RenewArmed reports whether c's renewal timer is armed.
func (c *Concurrency) RenewArmed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.renewOn
}
