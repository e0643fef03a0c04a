module example.com/ownmath

go 1.26.0

require github.com/limitkit/limitkit v0.0.0

replace github.com/limitkit/limitkit => ../../../..
