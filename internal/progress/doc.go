// Package progress reports the bytes a long operation (add, checkout,
// pull, push) has done: as a bar redrawn on a terminal, or as one JSON
// status line at a time for programs that follow it. It owns the rate
// (over a sliding window, so that the first instants do not show absurd
// speeds) and the ETA, and nothing else: the operations only call the
// Reporter interface, and the command decides which reporter, if any, to
// give them.
package progress
