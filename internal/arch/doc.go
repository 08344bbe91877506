// Package arch holds a test that keeps the import direction of STYLE.md:
// imports point toward engine; backends and sources never import each other.
package arch
