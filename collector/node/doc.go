// Package node reads the node itself: the cgroup v2 tree and its container
// cgroups, the network namespaces of containers, and (Scopes) the binding of
// each pod's netns, cgroups and IP to the kernel's watched scopes.
package node
