package main

import (
	"context"
	"os"
	"os/exec"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testMCPServerEnv, set, makes the test binary an MCP server over stdio
// whose tools misbehave on purpose: crash exits mid-call, crash_once
// exits mid-call unless the file $MARK exists (creating it), hang starts
// a child and never answers (writing the file $MARK first), ok answers.
const testMCPServerEnv = "FLOWRUN_TEST_MCP_SERVER"

func testMCPServerMain() {
	s := mcp.NewServer(&mcp.Implementation{Name: "flowrun-test", Version: "1"}, nil)
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
	s.AddTool(&mcp.Tool{Name: "ok", Description: "Answers.", InputSchema: empty},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "fine"}}}, nil
		})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
	os.Exit(0)
}
