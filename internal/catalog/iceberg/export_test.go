package iceberg

import "time"

// SetNow sets the clock an adapter's expiry sweeps by (time.Now).
func SetNow(a *Adapter, now func() time.Time) { a.now = now }
