package progress

import (
	"time"
)

// window is how far back the rate looks: long enough to smooth the bursts
// of a parallel copy, short enough to follow a slower disk or link.
const window = 5 * time.Second

// minSpan is the least time the rate needs before it is shown: over the
// first milliseconds a page-cache copy looks like hundreds of GB/s.
const minSpan = 500 * time.Millisecond

// maxSamples bounds the window's memory whatever the call rate.
const maxSamples = 64

type sample struct {
	at   time.Time
	done int64
}

// meter counts bytes done out of a total and measures the rate over a
// sliding window of samples.
type meter struct {
	total   int64
	done    int64
	start   time.Time
	samples []sample // oldest first, one per sampleEvery at most
}

func newMeter(total int64, now time.Time) meter {
	return meter{total: total, start: now, samples: []sample{{now, 0}}}
}

// sampleEvery spaces the samples so that maxSamples cover the window.
const sampleEvery = window / maxSamples

func (m *meter) add(n int64, now time.Time) {
	m.done += n
	if last := m.samples[len(m.samples)-1]; now.Sub(last.at) < sampleEvery {
		return
	}
	m.samples = append(m.samples, sample{now, m.done})
	// Keep one sample older than the window, so the rate spans it all.
	drop := 0
	for drop+1 < len(m.samples) && now.Sub(m.samples[drop+1].at) >= window {
		drop++
	}
	if len(m.samples)-drop > maxSamples {
		drop = len(m.samples) - maxSamples
	}
	m.samples = append(m.samples[:0], m.samples[drop:]...)
}

// Status is one report of an operation's progress; it is also the JSON
// status line (type "status" while running, "summary" at the end).
type Status struct {
	Type        string  `json:"type"`
	Action      string  `json:"action"`
	BytesDone   int64   `json:"bytes_done"`
	BytesTotal  int64   `json:"bytes_total"`
	PercentDone float64 `json:"percent_done"`
	// Rate is bytes a second over the last few seconds, 0 until known.
	Rate float64 `json:"bytes_per_second"`
	// ETA is the seconds left at Rate, -1 until known.
	ETA     float64 `json:"eta_seconds"`
	Elapsed float64 `json:"elapsed_seconds"`
}

func (m *meter) status(action string, now time.Time) Status {
	s := Status{Type: "status", Action: action, BytesDone: m.done, BytesTotal: m.total, ETA: -1,
		Elapsed: now.Sub(m.start).Seconds()}
	if m.total > 0 {
		s.PercentDone = 100 * float64(min(m.done, m.total)) / float64(m.total)
	}
	oldest := m.samples[0]
	if span := now.Sub(oldest.at); span >= minSpan {
		s.Rate = float64(m.done-oldest.done) / span.Seconds()
		if s.Rate > 0 && m.total >= m.done {
			s.ETA = float64(m.total-m.done) / s.Rate
		}
	}
	return s
}
