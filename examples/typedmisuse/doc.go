// Package typedmisuse shows that a typed handle ([chronicle.Workflow],
// [chronicle.Signal], [chronicle.HumanTask]) turns a mistake of type into
// a compile error: misuse.go, excluded from builds, misuses each one, and
// the test builds it and checks that the compiler reports every mistake
// on its line. See docs/client.md.
package typedmisuse
