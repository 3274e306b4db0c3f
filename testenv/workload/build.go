package workload

import (
	"context"

	"github.com/drainwatch/drainwatch/testenv/gobuild"
)

// ImageName is the short image name pods use to run the workload server.
const ImageName = "dwserver"

// Build compiles testenv/cmd/dwserver into dir (once per process and dir)
// and returns the binary's path.
func Build(ctx context.Context, dir string) (string, error) {
	return gobuild.Main(ctx, "./testenv/cmd/dwserver", dir, ImageName)
}
