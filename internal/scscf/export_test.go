package scscf

// SameURI and AccessURI expose the digest uri comparisons to the specs.
var (
	SameURI   = sameURI
	AccessURI = accessURI
)
