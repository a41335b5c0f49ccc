package provider_test

import (
	"fmt"

	"github.com/chronicleflow/chronicle/provider"
)

// An instance's partition is the FNV-1a 32-bit hash of its id modulo the
// store's partition count: every row of the instance carries it, and a
// store of one partition puts every instance in partition 0.
func ExamplePartitionOf() {
	for _, id := range []string{"order-1", "order-2", "order-3"} {
		fmt.Printf("%s: partition %d of 16, %d of 1\n", id, provider.PartitionOf(id, 16), provider.PartitionOf(id, 1))
	}
	// Output:
	// order-1: partition 13 of 16, 0 of 1
	// order-2: partition 4 of 16, 0 of 1
	// order-3: partition 7 of 16, 0 of 1
}
