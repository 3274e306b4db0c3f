/* Dispatch to the vmlinux.h generated for the target architecture: amd64
 * from this machine's BTF (make vmlinux), arm64 from Debian's arm64 cloud
 * kernel's (make vmlinux-arm64). CO-RE relocations make one header good for
 * every kernel of that architecture; only the architecture must match. */
#if defined(__TARGET_ARCH_x86)
#include "vmlinux/vmlinux_amd64.h"
#elif defined(__TARGET_ARCH_arm64)
#include "vmlinux/vmlinux_arm64.h"
#else
#error "no vmlinux.h for this architecture: generate one from its kernel's BTF and add it here"
#endif
