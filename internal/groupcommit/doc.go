// Package groupcommit holds the group-commit writer shared by the SQLite
// stores (checkpoint's states, the Batch API's finished lines): many
// goroutines add items, one goroutine commits those waiting, up to a
// most, in one transaction, and each adder learns when its group has
// committed. Under load the groups grow and the commits per second stay
// few; a lone adder never waits. An optional window lets a group fill
// while the adders of the last one come back.
package groupcommit
