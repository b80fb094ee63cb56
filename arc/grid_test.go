package arc

import "testing"

func TestGridText(t *testing.T) {
	got, err := GridText([]any{[]any{1, 2}, []any{3.0, 4}})
	if err != nil || got != "1 2\n3 4" {
		t.Errorf("GridText = %q, %v; want %q", got, err, "1 2\n3 4")
	}
	for _, bad := range []any{"1 2", []any{[]any{1}, 2}} {
		if _, err := GridText(bad); err == nil {
			t.Errorf("GridText(%#v): no error", bad)
		}
	}
}
