package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testMCPServerEnv, set, makes the test binary an MCP server over stdio
// whose tools misbehave on purpose: slow reports progress and logs before
// answering, crash exits mid-call, crash_once
// exits mid-call unless the file $MARK exists (creating it), hang starts
// a child and never answers (writing the file $MARK first), daemonize
// leaves a daemon (setsid) behind, ok answers.
const testMCPServerEnv = "FLOWRUN_TEST_MCP_SERVER"

func testMCPServerMain() {
	s := mcp.NewServer(&mcp.Implementation{Name: "flowrun-test", Version: "1"}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}}})
	s.AddTool(&mcp.Tool{Name: "slow", Description: "Reports progress and logs, then answers.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i := 1; i <= 2; i++ {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(),
					Progress: float64(i), Total: 2, Message: fmt.Sprintf("step %d of 2", i)})
			}
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: "slow", Data: "disk almost full"})
			// The client takes notifications apart from the call's answer:
			// working on a while lets them arrive before it.
			time.Sleep(300 * time.Millisecond)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slow done"}}}, nil
		})
	empty := map[string]any{"type": "object"}
	s.AddTool(&mcp.Tool{Name: "crash", Description: "Exits mid-call.", InputSchema: empty},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "crash_once", Description: "Exits mid-call the first time.", InputSchema: empty},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if _, err := os.Stat(os.Getenv("MARK")); err != nil {
				_ = os.WriteFile(os.Getenv("MARK"), []byte("crashed"), 0o644)
				os.Exit(3)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "recovered"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "hang", Description: "Never answers.", InputSchema: empty},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			child := exec.Command("sleep", "300")
			if err := child.Start(); err != nil {
				return nil, err
			}
			_ = os.WriteFile(os.Getenv("MARK"), []byte("hanging"), 0o644)
			_ = child.Wait()
			return nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "daemonize", Description: "Leaves a daemon behind.", InputSchema: empty},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// A double fork, the grandchild in a session of its own.
			if err := exec.Command("sh", "-c", "(setsid sleep 300 &)").Run(); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "daemonized"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "ok", Description: "Answers.", InputSchema: empty},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "fine"}}}, nil
		})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
	os.Exit(0)
}
