// Package pathremote is a remote that is another store directory on a file
// system (a path or file:// URL). It reads and writes that store through
// the same store and refs functions as local commands, so every rule of a
// store (atomic writes, one transaction per change) holds there too.
package pathremote
