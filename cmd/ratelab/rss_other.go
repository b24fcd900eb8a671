//go:build !linux

package main

// peakRSS says nothing where the kernel's count of the most held
// resident is not read (elsewhere than Linux, its unit differs or there
// is none).
func peakRSS() string { return "" }
