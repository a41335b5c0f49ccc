package chronicle_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/provider/memory"
)

// An instance that carries a customer's personal data names the customer
// as its data subject: its payloads are stored sealed with the customer's
// key. Erasing the customer destroys the key; the result can no longer be
// read, and the history still verifies.
func ExampleEngine_Erase() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "keys")
	defer os.RemoveAll(dir)
	// What `chronicle keys kek --id kek-1 --out kek-1` writes.
	if err := chronicle.GenerateKEK(filepath.Join(dir, "kek-1"), "kek-1"); err != nil {
		panic(err)
	}
	keys, err := chronicle.NewFileKeyProvider(filepath.Join(dir, "data-keys"), filepath.Join(dir, "kek-1"))
	if err != nil {
		panic(err)
	}
	engine, err := chronicle.New(memory.New(memory.Options{}), chronicle.Options{NodeID: "example", Keys: keys})
	if err != nil {
		panic(err)
	}
	defer engine.Close()
	_ = chronicle.RegisterWorkflow(engine, "greet", func(ctx *chronicle.Context, name string) (string, error) {
		return "Dear " + name, nil
	})

	_, err = engine.Start(ctx, "greet", "Ada Lovelace", &chronicle.StartOptions{InstanceID: "greeting-1", Subject: "customer-0815"})
	if err != nil {
		panic(err)
	}
	for worked, _ := engine.RunOnce(ctx); worked; worked, _ = engine.RunOnce(ctx) {
	}
	var greeting string
	inst, _ := engine.Describe(ctx, "greeting-1")
	_ = inst.Result(&greeting)
	fmt.Println(greeting)

	rep, err := engine.Erase(ctx, "customer-0815", chronicle.EraseOptions{Reason: "erasure request", Actor: "dpo", Ticket: "DSR-12"})
	if err != nil {
		panic(err)
	}
	for worked, _ := engine.RunOnce(ctx); worked; worked, _ = engine.RunOnce(ctx) {
	}
	fmt.Println("erased instances:", rep.Instances)

	inst, _ = engine.Describe(ctx, "greeting-1")
	var erased *chronicle.ErasedError
	fmt.Println("result erased:", errors.As(inst.Result(&greeting), &erased))
	fmt.Println("history verifies:", engine.Verify(ctx, "greeting-1") == nil)
	// Output:
	// Dear Ada Lovelace
	// erased instances: [greeting-1]
	// result erased: true
	// history verifies: true
}
