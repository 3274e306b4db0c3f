package scale

// Extrapolation is filled in below.
func (r Report) Extrapolation() string { return "" }
