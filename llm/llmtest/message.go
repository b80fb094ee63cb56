package llmtest

import "strings"

// MessageText is a chat message's content as text: the string itself,
// or the text of its parts joined, for content sent as a list of parts
// (as a message with images is).
func MessageText(content any) string {
	switch x := content.(type) {
	case string:
		return x
	case []any:
		var parts []string
		for _, p := range x {
			if pm, ok := p.(map[string]any); ok {
				if s, ok := pm["text"].(string); ok {
					parts = append(parts, s)
				}
			}
		}
		return strings.Join(parts, "")
	}
	return ""
}
