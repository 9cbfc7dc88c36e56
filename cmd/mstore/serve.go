package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/httpremote"
	"github.com/mstore/mstore/internal/remote/pathremote"
	"github.com/mstore/mstore/internal/remote/transfer"
	"github.com/mstore/mstore/internal/webview"
)

var serveCommand = &cli.Command{
	Name:  "serve",
	Usage: "serve the store (or a bucket, --remote s3://…) over HTTP for push and pull",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "addr", Usage: "HOST:PORT to listen on (port 0 picks one; the URL is printed)", Required: true},
		&cli.BoolFlag{Name: "allow-push", Usage: "accept pushes from clients with the token of --token-file"},
		&cli.StringFlag{Name: "token-file", Usage: "file holding the bearer token that push needs"},
		&cli.StringFlag{Name: "read-token-file", Usage: "file holding a token that reading needs too"},
		&cli.StringFlag{Name: "tls-cert", Usage: "serve HTTPS with this certificate (PEM)"},
		&cli.StringFlag{Name: "tls-key", Usage: "the certificate's private key (PEM)"},
		&cli.StringFlag{Name: "remote", Usage: "serve this remote (e.g. s3://BUCKET/PREFIX) instead of the store; nothing is kept locally"},
		&cli.IntFlag{Name: "max-requests", Value: 64, Usage: "requests served at once"},
		&cli.StringFlag{Name: "endpoint-url", Usage: "the object store of an s3:// --remote (default $AWS_ENDPOINT_URL)"},
		&cli.StringFlag{Name: "region", Usage: "its region (default $AWS_REGION, else us-east-1)"},
	},
	Action: func(c *cli.Context) error {
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		if err := needArgs(c, 0, "--addr HOST:PORT"); err != nil {
			return err
		}
		o := httpremote.ServerOptions{AllowPush: c.Bool("allow-push"), MaxConcurrent: c.Int("max-requests")}
		if o.AllowPush {
			if c.String("token-file") == "" {
				return usageError("--allow-push needs --token-file: pushes are accepted only with a token")
			}
			if o.PushToken, err = transfer.Token(c.String("token-file")); err != nil {
				return err
			}
		}
		if f := c.String("read-token-file"); f != "" {
			if o.ReadToken, err = transfer.Token(f); err != nil {
				return err
			}
		}
		cert, key := c.String("tls-cert"), c.String("tls-key")
		if (cert == "") != (key == "") {
			return usageError("--tls-cert and --tls-key go together")
		}
		var backend remote.Remote
		what := ""
		if u := c.String("remote"); u != "" {
			if backend, err = transfer.Open(u, transfer.OpenOptions{S3: s3Options(c)}); err != nil {
				return err
			}
			what = u
		} else {
			st, err := e.open(true)
			if err != nil {
				return err
			}
			backend, what = pathremote.New(st), st.Dir()
			o.Web = webview.New(st) // a browser's GET / (a bucket has no store to show)
		}
		defer backend.Close()
		o.Backend = backend
		ln, err := net.Listen("tcp", c.String("addr"))
		if err != nil {
			return err
		}
		srv := httpremote.NewServer(httpremote.NewHandler(o))
		scheme := "http"
		if cert != "" {
			scheme = "https"
		}
		url := scheme + "://" + ln.Addr().String()
		if e.json {
			e.printJSON(map[string]any{"url": url, "serving": what, "push": o.AllowPush})
		} else {
			e.result("serving %s on %s\n", what, url)
		}
		if o.Web != nil {
			e.note("web view: %s/ (read-only)\n", url)
		}
		if o.PushToken != "" && scheme == "http" && !isLoopback(ln.Addr()) {
			e.note("mstore: warning: push tokens cross the network in clear without --tls-cert/--tls-key\n")
		}
		done := make(chan error, 1)
		go func() {
			if cert != "" {
				done <- srv.ServeTLS(ln, cert, key)
			} else {
				done <- srv.Serve(ln)
			}
		}()
		select {
		case err = <-done:
		case <-c.Context.Done():
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = srv.Shutdown(ctx)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		return err
	},
}

func isLoopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}
