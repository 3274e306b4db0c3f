/* Dispatch to the vmlinux.h generated (make vmlinux) for the target
 * architecture. CO-RE relocations make one header good for every kernel of
 * that architecture; only the architecture must match. */
#if defined(__TARGET_ARCH_x86)
#include "vmlinux/vmlinux_amd64.h"
#else
#error "no vmlinux.h for this architecture: run make vmlinux on one and add it here"
#endif
