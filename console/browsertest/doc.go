// Package browsertest tests Chronicle's operator console (package
// console) in a real browser: headless Chromium driven by chromedp. It is
// a module of its own so that chromedp stays out of Chronicle's go.mod.
//
//	cd console/browsertest && go test -count=1 ./...
//
// The tests look for Chromium at $CHROMIUM, /usr/bin/chromium (Debian's
// chromium package, which make services installs) or
// /usr/bin/chromium-browser. When there is none they are skipped with a
// loud message, or fail under CI=true.
//
// With CHRONICLE_SCREENSHOTS=DIR, TestScreenshots writes PNG screenshots
// of the console's main pages into DIR (make screenshots writes those of
// docs/console.md).
package browsertest
