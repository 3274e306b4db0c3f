package node

import (
	"fmt"
	"os/exec"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// LocalImagePrefix marks an image that is a binary of this machine:
// "local:/usr/bin/python3". It carries no image config (stop signal
// SIGTERM).
const LocalImagePrefix = "local:"

// Image is the part of an OCI image config the stand-in runtime honours.
type Image struct {
	// Entrypoint is the binary the container runs when its command is
	// empty (the image's ENTRYPOINT).
	Entrypoint string
	// StopSignal is the image's STOPSIGNAL ("SIGQUIT", "QUIT", "3"): sent
	// when the pod sets no lifecycle.stopSignal. Empty: SIGTERM.
	StopSignal string
}

// BuiltinImages are the short image names every agent knows, shaped like
// the official images' configs over Debian's binaries: nginx stops
// gracefully on SIGQUIT, haproxy soft-stops on SIGUSR1. Config.Images adds
// to them and overrides them.
func BuiltinImages() map[string]Image {
	return map[string]Image{
		"nginx":   {Entrypoint: "/usr/sbin/nginx", StopSignal: "SIGQUIT"},
		"haproxy": {Entrypoint: "/usr/sbin/haproxy", StopSignal: "SIGUSR1"},
	}
}

// images is the agent's image table: the built-ins under Config.Images.
func (cfg *Config) images() map[string]Image {
	all := BuiltinImages()
	for name, img := range cfg.Images {
		all[name] = img
	}
	return all
}

// resolveImage finds the image config of spec.Image: "local:/path" is a
// bare binary, a short name (any ":tag" ignored) is looked up in images.
func resolveImage(spec *corev1.Container, images map[string]Image) (Image, error) {
	if path, ok := strings.CutPrefix(spec.Image, LocalImagePrefix); ok {
		return Image{Entrypoint: path}, nil
	}
	name, _, _ := strings.Cut(spec.Image, ":")
	img, ok := images[name]
	if !ok {
		return Image{}, fmt.Errorf("image %q is neither local:/path nor one of testenv's images", spec.Image)
	}
	return img, nil
}

// resolveArgv turns image, command and args into the program to run, like
// a runtime does with an image's entrypoint: command replaces the
// entrypoint (the image binary), args are appended.
func resolveArgv(spec *corev1.Container, images map[string]Image) (string, []string, Image, error) {
	img, err := resolveImage(spec, images)
	if err != nil {
		return "", nil, Image{}, err
	}
	argv := append([]string{img.Entrypoint}, spec.Args...)
	if len(spec.Command) > 0 {
		argv = append(append([]string{}, spec.Command...), spec.Args...)
		if other, ok := images[argv[0]]; ok {
			argv[0] = other.Entrypoint
		}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return "", nil, Image{}, fmt.Errorf("container %s: %w", spec.Name, err)
	}
	return path, argv, img, nil
}
