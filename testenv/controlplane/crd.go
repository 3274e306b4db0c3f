package controlplane

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// ApplyCRD applies a CustomResourceDefinition's manifest with kubectl
// (server-side: the large CRDs do not fit the last-applied annotation) and
// waits until the API server serves it. It polls the Established condition
// rather than run kubectl wait, which fails on a CRD whose status has no
// conditions yet ("status.conditions accessor error").
func (cp *ControlPlane) ApplyCRD(ctx context.Context, file, name string) error {
	if _, err := cp.Kubectl(ctx, "apply", "--server-side", "-f", file); err != nil {
		return err
	}
	for {
		out, err := cp.Kubectl(ctx, "get", "crd", name, "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		if err == nil && strings.TrimSpace(string(out)) == "True" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established: %w (last: %s %v)", name, ctx.Err(), out, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
