package cli

import (
	"bytes"
	"context"
	"fmt"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/fusescope/fusescope/test/e2e"

	"github.com/fusescope/fusescope/internal/profile"
)

// A file name made to run script in a page that would not escape it.
const hostileName = `<img src=x onerror=alert(1)>`

// A file name with control characters, as the page must quote it.
const (
	controlName       = "ctl\x1b[31mred\nline"
	controlNameQuoted = `"/ctl\x1b[31mred\nline"`
)

// TestReportInChromium makes a report of an interval trace (with slow
// requests and files, one of them named to inject HTML), a live
// system-call report and a bench run, and opens it in headless Chromium
// (Debian's, started by the test): no console message or exception, no
// dialog, the figures of the records in the page's text, the hostile
// name as text and no <img> element, and a screenshot that is not blank.
func TestReportInChromium(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "chromium")
	dir := t.TempDir()
	src, mnt := t.TempDir(), t.TempDir()
	for i := 0; i < 20; i++ {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("f%02d", i)), []byte("data"), 0o644)
	}
	if err := os.WriteFile(filepath.Join(src, hostileName), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A name with an ESC and a newline: the page quotes it as the
	// terminal views do, so neither reaches the page raw.
	if err := os.WriteFile(filepath.Join(src, controlName), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(e2e.Fusescope, "fs", "mount", src, mnt, "--preset", "nocache", "--latency", "lookup=100us", "--background").CombinedOutput(); err != nil {
		t.Fatalf("fs mount: %v\n%s", err, msg)
	}
	defer exec.Command(e2e.Fusescope, "fs", "umount", mnt).Run()

	// An interval trace: 0.2 s records while a script stats and reads.
	trace := filepath.Join(dir, "trace.jsonl")
	script := fmt.Sprintf("for i in 1 2 3 4 5; do cat %s/* >/dev/null; sleep 0.1; done", mnt)
	out, err := exec.Command(e2e.Fusescope, "trace", "--mount", mnt, "--files", "30", "--slower", "50us", "--json", "0.2", "--", "sh", "-c", script).Output()
	if err != nil {
		t.Fatalf("trace: %v", err)
	}
	os.WriteFile(trace, out, 0o644)
	// The figure the page must show: the LOOKUPs of all the intervals.
	recs, err := profile.ParseAll(out)
	if err != nil {
		t.Fatal(err)
	}
	var lookups uint64
	for _, r := range recs {
		for _, s := range r.Profile.Ops {
			if s.Op == "LOOKUP" {
				lookups += s.Count
			}
		}
	}
	if lookups == 0 || len(recs) < 2 {
		t.Fatalf("%d LOOKUPs in %d records:\n%.2000s", lookups, len(recs), out)
	}
	sys := filepath.Join(dir, "sys.json")
	if msg, err := exec.Command(e2e.Fusescope, "syscalls", "--json", "-o", sys, "--", "cat", filepath.Join(mnt, hostileName)).CombinedOutput(); err != nil {
		t.Fatalf("syscalls: %v\n%s", err, msg)
	}
	bench := filepath.Join(dir, "bench.json")
	if msg, err := exec.Command(e2e.Fusescope, "bench", "--native", "--labfs", "lab=--preset default", "--shell", "list=ls -lR . >/dev/null",
		"-n", "3", "--warmup", "0", "--scratch", "tmp", "--no-drop-caches", "--no-trace", "-o", bench).CombinedOutput(); err != nil {
		t.Fatalf("bench: %v\n%s", err, msg)
	}
	html := filepath.Join(dir, "report.html")
	if msg, err := exec.Command(e2e.Fusescope, "report", trace, sys, bench, "-o", html, "--title", "report "+hostileName).CombinedOutput(); err != nil {
		t.Fatalf("report: %v\n%s", err, msg)
	}
	raw, _ := os.ReadFile(html)
	if bytes.Contains(raw, []byte(hostileName)) || !bytes.Contains(raw, []byte("&lt;img src=x onerror=alert(1)&gt;")) {
		t.Errorf("the hostile name is not escaped in the HTML")
	}
	for _, bad := range []string{"http://", "https://", "<script"} {
		if bytes.Contains(raw, []byte(bad)) {
			t.Errorf("the page holds %q: it must need nothing from the network, and run nothing", bad)
		}
	}

	// Chromium.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(mustLook(t, "chromium")),
		chromedp.NoSandbox, chromedp.WindowSize(1300, 900), chromedp.Flag("headless", "new"))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	var mu sync.Mutex
	var problems []string
	err = chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			problems = append(problems, fmt.Sprintf("console.%s", e.Type))
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text)
		case *page.EventJavascriptDialogOpening:
			problems = append(problems, "a dialog opened: "+e.Message)
			go chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	})
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+html), chromedp.WaitReady("body")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text("body"))
	if err != nil {
		t.Fatal(err)
	}
	images, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("img").length`))
	if err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(90))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(problems) > 0 {
		t.Errorf("the page made console output, an exception or a dialog: %q", problems)
	}
	mu.Unlock()
	if images != 0 {
		t.Errorf("%d <img> elements: a name from the trace became HTML", images)
	}
	if !regexp.MustCompile(`LOOKUP\s+` + strconv.FormatUint(lookups, 10) + `\s`).MatchString(text) {
		t.Errorf("the page does not show the %d LOOKUPs of the records", lookups)
	}
	if strings.ContainsAny(text, "\x1b") || strings.Contains(text, "red\nline") || !strings.Contains(text, controlNameQuoted) {
		t.Errorf("the page does not quote the name with an ESC and a newline as %s", controlNameQuoted)
	}
	for _, want := range []string{hostileName, "FUSE requests by total time", "LOOKUP", "Requests over time", "Latency histograms",
		"Slowest requests", "Files by FUSE time", "Process timeline", "Critical path", "Hot spots", "Bench", "native", "lab"} {
		if !strings.Contains(text, want) {
			t.Errorf("the page's text lacks %q", want)
		}
	}
	// The screenshot: a page, not a blank: many pixels that are not the
	// background, in more than a few colours.
	img, _, err := image.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if keep := os.Getenv("FUSESCOPE_REPORT_SCREENSHOT"); keep != "" {
		os.WriteFile(keep, shot, 0o644) // to look at it
	}
	b := img.Bounds()
	colours, ink := map[uint32]bool{}, 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[r>>8<<16|g>>8<<8|bl>>8] = true
			if r < 0xe000 || g < 0xe000 || bl < 0xe000 {
				ink++
			}
		}
	}
	if total := (b.Dx() / 2) * (b.Dy() / 2); b.Dy() < 1500 || ink < total/50 || len(colours) < 20 {
		t.Errorf("the screenshot looks blank: %dx%d, %d of %d pixels inked, %d colours", b.Dx(), b.Dy(), ink, total, len(colours))
	}
}

func mustLook(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
