package helm_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/gotools"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

const (
	chart      = "drainwatch"
	fullValues = "drainwatch/ci/full-values.yaml"
	// recommendedValues turn on authentication and TLS.
	recommendedValues = "drainwatch/values-recommended.yaml"
	release           = "drainwatch"
	namespace         = "drainwatch"
)

// run runs a command (bounded to a minute) and returns its stdout.
func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	return runWithInput(t, nil, name, args...)
}

// runWithInput is run with stdin.
func runWithInput(t *testing.T, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// template renders the chart as `helm install drainwatch -n drainwatch` would,
// with values files, --set and --show-only flags as given.
func template(t *testing.T, values ...string) []byte {
	t.Helper()
	args := []string{"template", release, chart, "--namespace", namespace}
	for i := 0; i < len(values); i++ {
		if values[i] == "--set" || values[i] == "--show-only" {
			args = append(args, values[i], values[i+1])
			i++
			continue
		}
		args = append(args, "--values", values[i])
	}
	return run(t, gotools.Helm(t), args...)
}

// kustomize renders a kustomization with the cached kubectl.
func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	bin, err := controlplane.BinDir()
	if err != nil {
		if privileged.InCI() {
			t.Fatal(err) // CI builds kubectl (make controlplane): a skip there hides a failure
		}
		t.Skip(err)
	}
	return run(t, filepath.Join(bin, "kubectl"), "kustomize", dir)
}

// objects parses a multi-document rendering, keyed "Kind/name".
func objects(t *testing.T, data []byte) map[string]*unstructured.Unstructured {
	t.Helper()
	objs := map[string]*unstructured.Unstructured{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("parsing the rendering: %v", err)
		}
		if m == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		objs[u.GetKind()+"/"+u.GetName()] = u
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
