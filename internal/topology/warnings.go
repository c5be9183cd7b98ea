package topology

import (
	"fmt"
	"strings"

	"github.com/loctree/loctree/shared"
)

// WarningText is a build warning as the CLI and the agent print it: the
// warning, then the known value nearest to the one at fault ("did you
// mean", by the edit distance of unknown keys), or, when none is near, the
// known values.
func WarningText(w shared.Warning) string {
	if near := nearest(w.Value, w.Known); near != "" {
		return w.String() + near
	}
	if len(w.Known) == 0 {
		return w.String()
	}
	return fmt.Sprintf("%s (known: %s)", w, strings.Join(w.Known, ", "))
}
