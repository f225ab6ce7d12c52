package netns

// SplitRuleForTest exposes splitRule to the tests.
var SplitRuleForTest = splitRule
