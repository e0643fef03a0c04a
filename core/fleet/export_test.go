package fleet

// withoutSyncLoop leaves out the background sync loop, which runs on the
// wall clock: a test on a manual clock that syncs by hand decides the
// same whatever the machine's load.
func withoutSyncLoop() Option { return func(c *config) { c.noSyncLoop = true } }
