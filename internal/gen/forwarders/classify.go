package main

// The selection rule. Every exported top-level name of package httplimit
// is exactly one of:
//
//   - an option: a function whose only result is Option. Forwarded,
//     unless listed in notForwarded (AdapterOption, AdapterOutcome). So a new With*
//     option needs no entry here: go generate ./... forwards it.
//   - listed in forwarded: a type (forwarded as an alias, with the
//     exported constants of that type: a constant's type is its own
//     written type, else that of the nearest typed constant above it in
//     its block) or a function.
//   - listed in notForwarded, with the reason: package httplimit's API
//     for adapter authors, which the users of an adapter never name.
//   - a constant of a type in one of the lists: classified with its type.
//
// Any other name stops the generator (and fails TestUpToDate) until it is
// added to one of the lists. Methods are not classified: an alias has its
// type's methods.

// forwarded are the names, besides the options, that every HTTP adapter
// re-exports: the types an option takes or a deny handler receives, and
// the helpers that build an option's argument.
var forwarded = []string{
	"Option",        // what every With* returns
	"Rejection",     // what an adapter's DenyHandler receives
	"Reason",        // Rejection.Reason, with its constants
	"HeaderSet",     // for WithHeaders
	"ResetFormat",   // for WithResetFormat
	"NoKeyMode",     // for WithNoKey
	"Outcome",       // for WithOutcome
	"StatusIn",      // an Outcome's Count
	"StatusAtLeast", // an Outcome's Count
}

// notForwarded are httplimit's exported names that the adapters do not
// re-export, and why: users reach them, if ever, as httplimit.X.
var notForwarded = map[string]string{
	"AdapterOption":       "builds an adapter's own options (WithDenyHandler); for adapter authors",
	"Identity":            "each adapter has its own Identity, of its framework's request or context",
	"ContextWithIdentity": "puts the identity on a request's context; for adapters and handler tests",
	"WithIdentity":        "written httplimit.WithIdentity (issue 38: one option spelling; a new option adds no adapter name)",
	"StoreKey":            "builds the middleware's store key for operators' code (admin surface), not a middleware option",
	"RouteScope":          "builds a route's scope for operators' code (admin surface), not a middleware option",
	"AdapterOutcome":      "builds an adapter's own counting by outcome (grpclimit.WithOutcome); for adapter authors",
	"Config":              "what options write; adapter authors' and the engine's",
	"Engine":              "the engine an adapter wraps",
	"NewEngine":           "builds the engine an adapter wraps",
	"Result":              "the engine's verdict, for adapters",
	"Action":              "Result.Action, for adapters (with Pass, Skip, Deny)",
	"KeyParter":           "an optional interface of an adapter's request view",
	"KeyParts":            "an optional interface of an adapter's request view",
	"PeerAddrer":          "an optional interface of an adapter's request view",
	"AnyMethodRouter":     "an optional interface of an adapter's request view",
	"AnyRoutes":           "indexes a router's any-method routes, for adapters",
	"AnyRouteIndex":       "indexes a router's any-method routes, for adapters",
	"BuildAnyRoutes":      "indexes a router's any-method routes, for adapters",
	"Fields":              "the header fields an adapter writes",
	"Triple":              "the header fields an adapter writes",
	"Intern":              "an adapter's string interning",
	"NormalMethod":        "the method part of a scope, for adapters and tests",
	"ScopeMethod":         "the method part of a scope, for adapters and tests",
	"DefaultScope":        "the default scope as a function, for tests comparing it with the key cache",
	"MaxChecks":           "the bound WithCheck documents; reachable as httplimit.MaxChecks",

	// an adapter's description, its options, and what it writes
	"Adapter":            "what an adapter honours, for NewAdapterEngine",
	"OptionDecl":         "an adapter option an Adapter declares",
	"DeclareOption":      "declares an adapter option, for adapter authors",
	"NewAdapterEngine":   "builds the engine an adapter wraps",
	"AdapterOptionValue": "reads an adapter option back, for adapter authors",
	"FieldLimit":         "a header field name, for adapters writing Fields",
	"FieldRemaining":     "a header field name, for adapters writing Fields",
	"FieldReset":         "a header field name, for adapters writing Fields",
	"FieldRetryAfter":    "a header field name, for adapters writing Fields",
	"FieldPolicy":        "a header field name, for adapters writing Fields",
	"FieldRateLimit":     "a header field name, for adapters writing Fields",
	"ContentTypeProblem": "the default bodies' media type, for adapters",
	"MaxFields":          "the bound of Fields, for adapters",
	"IntText":            "formats a Triple's numbers, for adapters writing headers",
	"OutcomePanic":       "an outcome that is no status, which an adapter passes to Engine.Outcome",
	"OutcomeUnwritten":   "an outcome that is no status, which an adapter passes to Engine.Outcome",
	"OutcomeCanceled":    "an outcome that is no status, which Engine.Outcome finds from the context",
	"OutcomeTimeout":     "the deadline of Engine.Outcome's store calls; documented at httplimit.OutcomeTimeout",
}
