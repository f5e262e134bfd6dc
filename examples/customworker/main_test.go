package main

import (
	"context"
	"os"
	"testing"

	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/worker"
)

func TestWordCount(t *testing.T) {
	in := &worker.Input{State: map[string]any{"text": "one two three", "password": "hunter2"}}
	if d, err := maskSecrets(context.Background(), in); err != nil || !d.Modified || in.State["password"] != "********" {
		t.Fatalf("mask: %+v %v %v", d, err, in.State)
	}
	n := wordCount{}
	if err := n.Validate(in); err != nil {
		t.Fatal(err)
	}
	res, err := n.Execute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Updates["words"] != 3 || res.Actions[0].Name != "short" {
		t.Errorf("result = %+v", res)
	}
	if err := n.Validate(&worker.Input{State: map[string]any{}}); err == nil {
		t.Error("empty text validated")
	}
}

func TestGraphLoads(t *testing.T) {
	src, err := os.ReadFile("wordcount.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := graph.Parse(src, "wordcount.yaml", graph.WithTypes("wordcount")); err != nil {
		t.Fatal(err)
	}
}
