package progress

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mstore/mstore/internal/sizes"
)

const barWidth = 24

// drawBar redraws the terminal line: action, bar, bytes done/total, rate,
// ETA. The final draw clears the line, so that the command's own output
// starts on a clean one.
func (r *reporter) drawBar(s Status, final bool) {
	if final {
		if r.drawn {
			fmt.Fprint(r.w, "\r\x1b[K")
			r.drawn = false
		}
		return
	}
	fill := int(s.PercentDone / 100 * barWidth)
	bar := strings.Repeat("=", fill) + strings.Repeat(" ", barWidth-fill)
	if fill > 0 && fill < barWidth {
		bar = strings.Repeat("=", fill-1) + ">" + strings.Repeat(" ", barWidth-fill)
	}
	rate, eta := "--", "--"
	if s.Rate > 0 {
		rate = sizes.Human(int64(s.Rate)) + "/s"
	}
	if s.ETA >= 0 {
		eta = clock(time.Duration(s.ETA * float64(time.Second)))
	}
	counts := fmt.Sprintf("%3.0f%%  %s / %s  %s  ETA %s", s.PercentDone, sizes.Human(s.BytesDone), sizes.Human(s.BytesTotal), rate, eta)
	line := fmt.Sprintf("%s [%s] %s", r.action, bar, counts)
	if r.cols > 0 && len(line) >= r.cols {
		// A line that wraps cannot be redrawn in place: drop the bar, then
		// cut what is left to the width.
		if line = r.action + " " + counts; len(line) >= r.cols {
			line = line[:r.cols-1]
		}
	}
	fmt.Fprint(r.w, "\r\x1b[K"+line)
	r.drawn = true
}

// drawJSON writes one status line; the last one is the summary.
func (r *reporter) drawJSON(s Status, final bool) {
	if final {
		s.Type = "summary"
	}
	b, _ := json.Marshal(s)
	r.w.Write(append(b, '\n'))
}

// clock prints a duration as M:SS, or H:MM:SS from an hour.
func clock(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int(d/time.Hour), int(d/time.Minute)%60, int(d/time.Second)%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%d:%02d", m, s)
}
