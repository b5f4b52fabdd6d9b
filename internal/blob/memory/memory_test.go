package memory

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/blobtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(*testing.T) blob.Store { return New() })
}
