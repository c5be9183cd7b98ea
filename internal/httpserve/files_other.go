//go:build !unix

package httpserve

func capToFiles(n int) int { return n }
