package progress

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// clockAt is a settable clock for the reporter.
type clockAt struct{ t time.Time }

func (c *clockAt) now() time.Time { return c.t }

func newTest(mode Mode) (*reporter, *clockAt, *bytes.Buffer) {
	var buf bytes.Buffer
	c := &clockAt{t: time.Unix(1e9, 0)}
	r := New(&buf, "add", mode).(*reporter)
	r.now = c.now
	return r, c, &buf
}

// TestFirstFrameShowsNoRate: the first instants of a copy (page cache, a
// burst) must not show a rate or an ETA, which was hundreds of GB/s.
func TestFirstFrameShowsNoRate(t *testing.T) {
	r, c, buf := newTest(Bar)
	r.Start(10e9)
	c.t = c.t.Add(120 * time.Millisecond)
	r.Add(3e9)
	line := lastFrame(buf.String())
	if !strings.Contains(line, "3.0 GB / 10.0 GB") {
		t.Errorf("frame %q lacks bytes done / total", line)
	}
	if !strings.Contains(line, "--  ETA --") {
		t.Errorf("frame %q shows a rate or an ETA after 120 ms", line)
	}
}

// TestRateOverSlidingWindow: the rate follows the last seconds, not the
// average since the start, and the ETA is what is left at that rate.
func TestRateOverSlidingWindow(t *testing.T) {
	r, c, _ := newTest(Bar)
	r.Start(1e12)
	// 20 s at 100 MB/s, then 10 s at 10 MB/s.
	for i := 0; i < 200; i++ {
		c.t = c.t.Add(100 * time.Millisecond)
		r.Add(10e6)
	}
	for i := 0; i < 100; i++ {
		c.t = c.t.Add(100 * time.Millisecond)
		r.Add(1e6)
	}
	s := r.m.status("add", c.t)
	if s.Rate < 9e6 || s.Rate > 11e6 {
		t.Errorf("rate %.0f B/s, want about 10 MB/s (the average since the start is 70 MB/s)", s.Rate)
	}
	left := float64(1e12-s.BytesDone) / s.Rate
	if s.ETA < left*0.99 || s.ETA > left*1.01 {
		t.Errorf("ETA %.0f s, want %.0f", s.ETA, left)
	}
	if len(r.m.samples) > maxSamples {
		t.Errorf("%d samples kept, bound %d", len(r.m.samples), maxSamples)
	}
}

func TestBarClearsItsLine(t *testing.T) {
	r, c, buf := newTest(Bar)
	r.Start(100)
	c.t = c.t.Add(time.Second)
	r.Add(100)
	r.Finish()
	if !strings.HasSuffix(buf.String(), "\r\x1b[K") {
		t.Errorf("the bar's last write %q does not clear its line", buf.String())
	}
	if !strings.Contains(buf.String(), "100 B / 100 B") {
		t.Errorf("no frame with the full count: %q", buf.String())
	}
}

// TestJSONLines: every line is one JSON status; the last is the summary
// with all bytes done.
func TestJSONLines(t *testing.T) {
	r, c, buf := newTest(JSON)
	r.Start(3000)
	for i := 0; i < 3; i++ {
		c.t = c.t.Add(time.Second)
		r.Add(1000)
	}
	r.Finish()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5 (start, 3 updates, summary):\n%s", len(lines), buf)
	}
	var last Status
	for i, l := range lines {
		var s Status
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("line %d %q: %v", i, l, err)
		}
		if s.Action != "add" || s.BytesTotal != 3000 {
			t.Errorf("line %d: %+v", i, s)
		}
		last = s
	}
	if last.Type != "summary" || last.BytesDone != 3000 || last.PercentDone != 100 {
		t.Errorf("summary %+v", last)
	}
}

func TestClock(t *testing.T) {
	for d, want := range map[time.Duration]string{
		9 * time.Second: "0:09", 61 * time.Second: "1:01", 3723 * time.Second: "1:02:03",
	} {
		if got := clock(d); got != want {
			t.Errorf("clock(%v) = %q, want %q", d, got, want)
		}
	}
}

func lastFrame(s string) string {
	frames := strings.Split(s, "\r\x1b[K")
	return frames[len(frames)-1]
}

// TestNarrowTerminal: a frame never reaches the terminal's width, where it
// would wrap and could no longer be redrawn in place.
func TestNarrowTerminal(t *testing.T) {
	for _, cols := range []int{100, 60, 20} {
		r, c, buf := newTest(Bar)
		r.cols = cols
		r.Start(10e9)
		c.t = c.t.Add(time.Second)
		r.Add(3e9)
		for _, f := range strings.Split(buf.String(), "\r\x1b[K") {
			if len(f) >= cols {
				t.Errorf("%d columns: frame %q is %d wide", cols, f, len(f))
			}
		}
		if cols == 60 && !strings.Contains(lastFrame(buf.String()), "3.0 GB / 10.0 GB") {
			t.Errorf("60 columns: the counts were cut: %q", lastFrame(buf.String()))
		}
	}
}

// TestConcurrentAdds: the workers of a copy report at once; every byte is
// counted (run under -race in CI).
func TestConcurrentAdds(t *testing.T) {
	r, _, buf := newTest(JSON)
	r.now = time.Now
	r.Start(8 * 1000 * 4096)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				r.Add(4096)
			}
		}()
	}
	wg.Wait()
	r.Finish()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var last Status
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.BytesDone != 8*1000*4096 || last.Type != "summary" {
		t.Errorf("summary %+v (%v), want all %d bytes", last, err, 8*1000*4096)
	}
}
