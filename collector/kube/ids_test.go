package kube

// A container id and a pod UID as the API spells them.
const (
	testCID = "3f4b1c2d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"
	testUID = "1b2c3d4e-5f60-4718-a9b0-c1d2e3f40516"
)
