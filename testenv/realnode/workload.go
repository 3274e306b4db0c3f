package realnode

import (
	"context"

	"github.com/drainwatch/drainwatch/testenv/workload"
)

// WorkloadImage is testenv's workload server under the name its
// Deployments use (workload.ImageName, which the runtime reads as
// docker.io/library/…:latest), with Debian's dash as /bin/sh: ignore-term
// mode runs the server under a shell, as PID 1.
func WorkloadImage(ctx context.Context) (Image, error) {
	img, err := StaticImage(ctx, "./testenv/cmd/dwserver", BinaryDir(), "docker.io/library/"+workload.ImageName+":latest")
	if err != nil {
		return Image{}, err
	}
	if img.Files, err = HostBinaries(workload.ShellPath); err != nil {
		return Image{}, err
	}
	return img, nil
}
