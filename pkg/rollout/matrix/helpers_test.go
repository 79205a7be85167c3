package matrix

import "slices"

// Three text helpers the matrices used from inside pkg/rollout, where they
// format the planner's messages. They shape only the tests' reports and a
// comparison of tag lists, no decision the matrices prove, so they are
// copied here rather than added to pkg/rollout's API.

// orNone is s, or "none" when s is empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// short abbreviates an nkey for messages: the first 8 characters and "...".
func short(key string) string {
	if len(key) <= 12 {
		return key
	}
	return key[:8] + "..."
}

// sortedCopy is s sorted, without duplicates; s is left as it is.
func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return slices.Compact(c)
}
