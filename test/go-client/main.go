// A second real client of the deployments and invocations API: the Go SDK
// (github.com/onkernel/kernel-go-sdk v0.24.0, the one Kernel's CLI is built on), making
// the calls `kernel deploy` and `kernel invoke` make, in their order and on their wire:
// a zip whose entries carry mode 0 (zip.Writer.Create, as the CLI's zipper), env vars as
// env_vars.KEY fields, the deployment's events followed until running, then async
// invocations followed to their result. It prints one JSON object of what it saw;
// test/e2e/go-client.test.ts checks it. KERNEL_BASE_URL and KERNEL_API_KEY name the
// service; the first argument is the app name.
package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	kernel "github.com/onkernel/kernel-go-sdk"
)

const appSource = `import Kernel from '@onkernel/sdk';
import { greeting } from './lib/greet.js';
const app = new Kernel().app(APP_NAME);
app.action('env', async (ctx, payload) => {
  console.log('env action for ' + payload.who);
  return { foo: process.env.FOO ?? null, spaced: process.env.B ?? null, entry: process.env.ENTRYPOINT_RELPATH ?? null, greeting: greeting(payload.who) };
});
app.action('fail', async (ctx) => {
  throw new Error('failing on purpose');
});
`

type deployResult struct {
	ID           string            `json:"id"`
	Events       []string          `json:"events"`
	Summaries    []string          `json:"summaries"`
	SummaryEnv   map[string]string `json:"summary_env"`
	Actions      []string          `json:"actions"`
	Status       string            `json:"status"`
	StatusReason string            `json:"status_reason"`
	StreamError  string            `json:"stream_error"`
}

type invokeResult struct {
	CreateStatus string   `json:"create_status"`
	Logs         []string `json:"logs"`
	Status       string   `json:"status"`
	Output       string   `json:"output"`
	StatusReason string   `json:"status_reason"`
	StreamError  string   `json:"stream_error"`
}

type report struct {
	Deploy  deployResult            `json:"deploy"`
	Invokes map[string]invokeResult `json:"invokes"`
	Errors  []string                `json:"errors"`
}

func bundle(appName string) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	files := []struct{ name, text string }{
		{"package.json", `{"name":"go-client-app","private":true,"type":"module","dependencies":{"@onkernel/sdk":"0.84.0"}}`},
		{"lib/", ""},
		{"lib/greet.js", "export const greeting = (who) => 'hello ' + who;\n"},
		{"index.js", "const APP_NAME = " + mustJSON(appName) + ";\n" + appSource},
	}
	for _, f := range files {
		w, err := zw.Create(f.name) // mode 0, as the CLI writes them
		if err != nil {
			return nil, err
		}
		if _, err := w.Write([]byte(f.text)); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func deploy(ctx context.Context, client kernel.Client, appName string, out *report) bool {
	zipped, err := bundle(appName)
	if err != nil {
		out.Errors = append(out.Errors, "zip: "+err.Error())
		return false
	}
	created, err := client.Deployments.New(ctx, kernel.DeploymentNewParams{
		EntrypointRelPath: kernel.Opt("index.js"),
		EnvVars:           map[string]string{"FOO": "bar", "B": "x y", "ENTRYPOINT_RELPATH": "not the app's to set"},
		File:              bytes.NewReader(zipped),
		Force:             kernel.Opt(false),
		Version:           kernel.Opt("v1"),
	})
	if err != nil {
		out.Errors = append(out.Errors, "deploy: "+err.Error())
		return false
	}
	out.Deploy.ID = created.ID
	stream := client.Deployments.FollowStreaming(ctx, created.ID, kernel.DeploymentFollowParams{})
	defer stream.Close()
	for stream.Next() {
		ev := stream.Current()
		if ev.Event == "sse_heartbeat" {
			continue
		}
		out.Deploy.Events = append(out.Deploy.Events, ev.Event)
		switch ev.Event {
		case "app_version_summary":
			out.Deploy.Summaries = append(out.Deploy.Summaries, ev.AppName+"@"+ev.Version)
			out.Deploy.SummaryEnv = ev.EnvVars
			for _, a := range ev.Actions {
				out.Deploy.Actions = append(out.Deploy.Actions, a.Name)
			}
		case "deployment_state":
			status := ev.Deployment.Status
			out.Deploy.Events[len(out.Deploy.Events)-1] += ":" + string(status)
			if status == "running" || status == "failed" || status == "stopped" {
				out.Deploy.Status = string(status)
				out.Deploy.StatusReason = ev.Deployment.StatusReason
				return status == "running" // `kernel deploy` exits here
			}
		case "error":
			out.Errors = append(out.Errors, "deploy event error: "+ev.Error.Message)
			return false
		}
	}
	if err := stream.Err(); err != nil {
		out.Deploy.StreamError = err.Error()
	}
	return false
}

func invoke(ctx context.Context, client kernel.Client, appName, action, payload string) invokeResult {
	var res invokeResult
	created, err := client.Invocations.New(ctx, kernel.InvocationNewParams{
		AppName: appName, ActionName: action, Version: "v1", Async: kernel.Opt(true), Payload: kernel.Opt(payload),
	})
	if err != nil {
		res.StreamError = "create: " + err.Error()
		return res
	}
	res.CreateStatus = string(created.Status)
	// The newer CLI sends since empty when --since is not given.
	stream := client.Invocations.FollowStreaming(ctx, created.ID, kernel.InvocationFollowParams{Since: kernel.Opt("")})
	defer stream.Close()
	for stream.Next() {
		ev := stream.Current()
		switch ev.Event {
		case "log":
			res.Logs = append(res.Logs, ev.Message)
		case "invocation_state":
			status := string(ev.Invocation.Status)
			if status == "succeeded" || status == "failed" {
				res.Status, res.Output, res.StatusReason = status, ev.Invocation.Output, ev.Invocation.StatusReason
				return res
			}
		case "error":
			res.StreamError = ev.Error.Code + ": " + ev.Error.Message
			return res
		}
	}
	if err := stream.Err(); err != nil {
		res.StreamError = err.Error()
	}
	return res
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: go-client <app name>")
		os.Exit(2)
	}
	appName := os.Args[1]
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	client := kernel.NewClient() // KERNEL_BASE_URL, KERNEL_API_KEY
	out := report{Invokes: map[string]invokeResult{}}
	if deploy(ctx, client, appName, &out) {
		out.Invokes["env"] = invoke(ctx, client, appName, "env", `{"who":"go"}`)
		out.Invokes["fail"] = invoke(ctx, client, appName, "fail", `{}`)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}
