package scscf

// SameURI exposes the digest uri comparison to the specs.
var SameURI = sameURI
