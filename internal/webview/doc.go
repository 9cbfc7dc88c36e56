// Package webview is the read-only web view that `mstore serve` mounts
// beside the /v1/ protocol: plain server-rendered HTML (html/template, no
// scripts, no external assets) for a person with a browser.
//
//	GET /                      refs with their current version, size and tags; all tags; the store's dedup
//	GET /ref?name=NAME         a ref's history (each version's size and tags), newest first
//	GET /version?v=REF         a version's files, tensors (paginated) and how its bytes are shared
//	GET /diff?from=REF&to=REF  the diff of two versions (paginated)
//
// Every name on a page comes from the store, and tensor names and file
// paths come from model files: html/template escapes them, and each page is
// sent with a Content-Security-Policy that allows no script at all, so a
// hostile name can neither run nor load anything. Lists are cut into pages
// of PageSize entries, so a model of 100,000 tensors never makes a page of
// 100,000 rows. The view reads the store through names and gc, as the
// commands do; it never changes anything.
package webview
