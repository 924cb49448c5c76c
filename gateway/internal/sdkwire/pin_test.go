package sdkwire

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestSDKVersionPinned fails when go.mod's go-sdk is not the version this
// package (and the files named in Mirrors) copy the behaviour of, or when
// go.mod replaces it: a new go-sdk may decode, check or answer differently,
// and the front door would then answer unlike go-sdk without any other test
// noticing at once.
func TestSDKVersionPinned(t *testing.T) {
	mod, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	req := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(SDKModule) + `\s+(\S+)`).FindSubmatch(mod)
	replaced := regexp.MustCompile(`(?m)^\s*(?:replace\s+)?` + regexp.QuoteMeta(SDKModule) + `(\s+\S+)?\s+=>`).Match(mod)
	got := "(not required)"
	if req != nil {
		got = string(req[1])
	}
	if got != SDKVersion || replaced {
		if replaced {
			got += " (replaced)"
		}
		t.Fatalf("go.mod requires %s %s, but the gateway mirrors the wire behaviour of %s.\n"+
			"Re-check each of these against the new version's source, update what changed, "+
			"then set sdkwire.SDKVersion:\n  %s", SDKModule, got, SDKVersion, strings.Join(Mirrors, "\n  "))
	}
}
