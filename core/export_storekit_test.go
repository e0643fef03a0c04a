package core

// The optional store interfaces as core looks for them, for
// TestStorekitInterfacesAreCores.
type (
	LocalStoreT      = localStore
	FallbackStoreT   = fallbackStore
	VerbStoreT       = verbsStore
	ReserveStoreT    = reserveStore
	ElasticStoreT    = elasticStore
	RefunderT        = refunder
	PolicyRegistrarT = policyRegistrar
	SlotStoreT       = slotStore
)
