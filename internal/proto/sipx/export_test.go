package sipx

// RequestKey exposes the hash that seeds a request's target walk, for the test that pins it.
var RequestKey = requestKey
