// Package sizes writes byte counts for people, in the one way the commands
// and the web view both print them.
package sizes
