package client_test

import (
	"errors"
	"testing"

	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// TestDirArchive: a run removed from the live log into a directory is read
// back through DirArchive as it was, the read model no longer has it
// (ErrNotInReadModel), and a run the archive lacks is ErrNotArchived.
func TestDirArchive(t *testing.T) {
	c, store := engine(t)
	ctx := timeout(t)
	run, err := c.Start(ctx, mustGraph(t, helloYAML), client.WithInput(map[string]any{"name": "Ada"}))
	if err != nil {
		t.Fatal(err)
	}
	want, err := c.Wait(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	waitListed(t, ctx, c, run, projection.RunCompleted)

	a, err := client.DirArchive(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readmodel.Remove(ctx, store, run, a); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Summary(ctx, run); !errors.Is(err, client.ErrNotInReadModel) {
		t.Errorf("Summary of a removed run: %v, want ErrNotInReadModel", err)
	}

	if _, err := c.Get(ctx, run); !errors.Is(err, events.ErrRunNotFound) {
		t.Fatalf("Get of a removed run without its archive: %v, want events.ErrRunNotFound", err)
	}
	got, err := client.New(store, client.WithArchive(a)).Get(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != projection.RunCompleted || got.VarsMap()["greeting"] != want.VarsMap()["greeting"] {
		t.Errorf("archived run: status %s, greeting %v; want completed, %v", got.Status, got.VarsMap()["greeting"], want.VarsMap()["greeting"])
	}
	if _, err := a.Get(ctx, "nosuchrun"); !errors.Is(err, client.ErrNotArchived) {
		t.Errorf("Get of a run not archived: %v, want ErrNotArchived", err)
	}
	if _, err := client.DirArchive(t.TempDir() + "/missing"); err == nil {
		t.Error("DirArchive of a missing directory: no error")
	}
}
