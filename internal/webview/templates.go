package webview

import (
	"fmt"
	"html/template"
	"net/url"
	"strings"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/sizes"
)

var funcs = template.FuncMap{
	"bytes": sizes.Human,
	"short": func(d objects.Digest) string { return d.Short() },
	"shape": func(s []int64) string {
		parts := make([]string, len(s))
		for i, v := range s {
			parts[i] = fmt.Sprint(v)
		}
		return "[" + strings.Join(parts, ",") + "]"
	},
	"join":  strings.Join,
	"ratio": func(f float64) string { return fmt.Sprintf("%.2f×", f) },
	"plus1": func(i int) int { return i + 1 },
}

func queryEscape(s string) string { return url.QueryEscape(s) }

func htmlEscape(s string) string { return template.HTMLEscapeString(s) }

var pages = template.Must(template.New("").Funcs(funcs).Parse(`
{{define "head"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.}} · mstore</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{padding:.2em .8em;text-align:left;border-bottom:1px solid #ddd;vertical-align:top}
td.n,th.n{text-align:right}
code{font:12px ui-monospace,monospace}
.added{color:#070}.removed{color:#a00}.changed{color:#a60}.renamed{color:#05a}
nav a{margin-right:1em}
</style></head><body>
<nav><a href="/">mstore</a></nav>
{{end}}

{{define "pager"}}{{if gt .Pages 1}}<p class="pager">page {{.Page}} of {{.Pages}} ({{plus1 .From}}–{{.To}} of {{.Total}})
{{if .Prev}}<a rel="prev" href="{{.Prev}}">previous</a>{{end}} {{if .Next}}<a rel="next" href="{{.Next}}">next</a>{{end}}</p>{{end}}{{end}}

{{define "index"}}{{template "head" "refs"}}
<h1>Refs</h1>
<table id="refs"><tr><th>name</th><th>version</th><th class="n">size</th><th>tags</th><th class="n">moves</th><th>moved</th></tr>
{{range .Refs}}<tr><td>{{if .Current}}<a href="/ref?name={{.Name}}">{{.Name}}</a>{{else}}{{.Name}} (tags only){{end}}</td>
<td>{{with .Current}}<a href="/version?v={{.}}"><code>{{short .}}</code></a>{{else}}–{{end}}</td>
<td class="n">{{if .Unreadable}}unreadable{{else if .Current}}{{bytes .LogicalBytes}}{{end}}</td>
<td>{{join .Tags ", "}}</td><td class="n">{{.Entries}}</td><td>{{if .Current}}{{.Moved.Format "2006-01-02 15:04:05Z07:00"}}{{end}}</td></tr>
{{else}}<tr><td colspan="6">no refs yet: <code>mstore add PATH</code></td></tr>{{end}}
</table>
<h2>Tags</h2>
<table id="tags"><tr><th>tag</th><th>digest</th></tr>
{{range .Tags}}<tr><td><a href="/version?v={{.Name}}:{{.Tag}}">{{.Name}}:{{.Tag}}</a></td><td><code>{{.Digest}}</code></td></tr>
{{else}}<tr><td colspan="2">no tags</td></tr>{{end}}
</table>
<h2>Store</h2>
<table id="usage">
<tr><th>versions</th><td class="n">{{.Usage.Versions}}</td></tr>
<tr><th>blobs</th><td class="n">{{.Usage.Blobs}}</td></tr>
<tr><th>logical</th><td class="n">{{bytes .Usage.LogicalBytes}}</td></tr>
<tr><th>unique raw</th><td class="n">{{bytes .Usage.UniqueRawBytes}}</td></tr>
<tr><th>stored</th><td class="n">{{bytes .Usage.StoredBytes}}</td></tr>
<tr><th>dedup</th><td class="n">{{ratio .Dedup}}</td></tr>
</table>
</body></html>{{end}}

{{define "ref"}}{{template "head" .Name}}
<h1>{{.Name}}</h1>
<table id="history"><tr><th>version</th><th>digest</th><th class="n">size</th><th>tags</th><th>time</th><th>message</th><th></th></tr>
{{$name := .Name}}{{range .History}}<tr><td>{{$name}}~{{.Back}}</td><td><a href="/version?v={{.Digest}}"><code>{{short .Digest}}</code></a></td>
<td class="n">{{bytes .Size}}</td><td>{{join .Tags ", "}}</td><td>{{.Time.Format "2006-01-02 15:04:05Z07:00"}}</td><td>{{.Message}}</td>
<td>{{if .Older}}<a href="/diff?from={{$name}}~{{plus1 .Back}}&amp;to={{$name}}~{{.Back}}">diff with previous</a>{{end}}</td></tr>{{end}}
</table>
{{template "pager" .Pager}}
</body></html>{{end}}

{{define "version"}}{{template "head" .Spec}}
<h1>{{.Spec}}</h1>
<table id="summary">
<tr><th>digest</th><td><code>{{.Digest}}</code></td></tr>
<tr><th>format</th><td>{{.Manifest.Format}}</td></tr>
<tr><th>logical</th><td>{{bytes .Usage.LogicalBytes}} in {{len .Manifest.Files}} files, {{len .Manifest.Tensors}} tensors</td></tr>
<tr><th>unique</th><td>{{bytes .Usage.UniqueBytes}} (in blobs no other named version needs)</td></tr>
<tr><th>shared</th><td>{{bytes .Usage.SharedBytes}} (with other named versions)</td></tr>
<tr><th>held by</th><td>{{if .Usage.HeldBy}}{{join .Usage.HeldBy ", "}}{{else}}no name: gc frees it{{end}}</td></tr>
<tr><th>freed</th><td>{{bytes .Usage.IfUnnamed.FreesBytes}} by gc once no name holds it</td></tr>
</table>
<h2>Files</h2>
<table id="files"><tr><th>path</th><th>role</th><th class="n">size</th><th>blake3</th></tr>
{{range .Files}}<tr><td>{{.Path}}</td><td>{{.Role}}</td><td class="n">{{bytes .Size}}</td><td><code>{{short .Digest}}</code></td></tr>{{end}}
</table>
{{if gt (len .Manifest.Files) (len .Files)}}<p>and {{len .Manifest.Files}} files in all: <code>mstore show {{.Spec}}</code> lists them.</p>{{end}}
<h2>Tensors</h2>
<table id="tensors"><tr><th>name</th><th>dtype</th><th>shape</th><th class="n">size</th><th>blake3</th></tr>
{{range .Tensors}}<tr><td>{{.Name}}</td><td>{{.DType}}</td><td>{{shape .Shape}}</td><td class="n">{{bytes .Size}}</td><td><code>{{short .Digest}}</code></td></tr>{{end}}
</table>
{{template "pager" .Pager}}
</body></html>{{end}}

{{define "diff"}}{{template "head" "diff"}}
<h1>{{.From}} → {{.To}}</h1>
<p><a href="/version?v={{.FromD}}"><code>{{short .FromD}}</code></a> → <a href="/version?v={{.ToD}}"><code>{{short .ToD}}</code></a>{{if .Same}}: the same version{{end}}</p>
<table id="counts"><tr><th>tensors</th><th class="n">count</th><th class="n">bytes</th></tr>
{{range .Counts}}<tr class="{{.Change}}"><td>{{.Label}}</td><td class="n">{{.Count}}</td><td class="n">{{bytes .Bytes}}</td></tr>
{{end}}</table>
<h2>Files</h2>
<table id="filediff"><tr><th>change</th><th>path</th><th>role</th></tr>
{{range .ChangedFiles}}<tr class="{{.Change}}"><td>{{.Change}}</td><td>{{.Path}}</td><td>{{.Role}}</td></tr>{{else}}<tr><td colspan="3">no file changed</td></tr>{{end}}
</table>
<h2>Tensors</h2>
<table id="tensordiff"><tr><th>change</th><th>name</th><th>from</th><th>to</th><th class="n">new chunk bytes</th></tr>
{{range .Tensors}}<tr class="{{.Change}}"><td>{{.Change}}</td><td>{{if .FromName}}{{.FromName}} → {{end}}{{.Name}}</td>
<td>{{if .FromDType}}{{.FromDType}} {{shape .FromShape}}{{end}}</td><td>{{if .ToDType}}{{.ToDType}} {{shape .ToShape}}{{end}}</td><td class="n">{{bytes .NewChunkBytes}}</td></tr>
{{else}}<tr><td colspan="5">no tensor changed</td></tr>{{end}}
</table>
{{template "pager" .Pager}}
</body></html>{{end}}

{{define "error"}}{{template "head" .Class}}
<h1>{{.Class}}</h1>
<p id="error">{{.Message}}</p>
</body></html>{{end}}
`))
